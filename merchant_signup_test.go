package agentpay

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/internal/vault"
)

// TestSignUpMerchant: a signed-in person signs a merchant up; it is
// created as registration creates one (both key pairs, stored hashed, shown
// in the answer only; the contact e-mail's confirmation mailed with it),
// the person owns it at once, and keeps owning it when the contact
// address (another person's) is confirmed and then changed. Refused
// fields, and a person whose own address is unverified, create nothing.
func TestSignUpMerchant(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	person := h.user(t, "founder")
	v := h.viewer(t, person)
	count := func() int {
		n, err := h.env.DB.Ent.Merchant.Query().Count(ctx)
		require.NoError(t, err)
		return n
	}

	for _, tc := range []struct {
		name string
		in   MerchantSignup
		want string
	}{
		{"no name", MerchantSignup{Email: "shop@example.com"}, "name"},
		{"no e-mail", MerchantSignup{Name: "Shop"}, "email"},
		{"address not of the chain", MerchantSignup{Name: "Shop", Email: "shop@example.com",
			SettlementAddress: "0x000000000000000000000000000000000000dEaD", SettlementChain: "solana"}, "settlement_address"},
		{"unknown chain", MerchantSignup{Name: "Shop", Email: "shop@example.com", SettlementChain: "dogecoin"}, "settlement_chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.SignUpMerchant(ctx, v, tc.in)
			require.True(t, IsValidation(err), "%v", err)
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, count(), "a refused sign-up creates nothing")
		})
	}

	unverified, err := h.svc.CreateUser(ctx, NewUser{Email: "unverified@example.com", Username: "unverified_one"})
	require.NoError(t, err)
	_, err = h.svc.SignUpMerchant(ctx, h.viewer(t, unverified), MerchantSignup{Name: "Shop", Email: "shop@example.com"})
	require.ErrorIs(t, err, ErrSignUpUnverified)
	require.Zero(t, count())

	reg, err := h.svc.SignUpMerchant(ctx, v, MerchantSignup{Name: " Signed Up Shop ", Email: "Billing@Shop.example",
		SettlementAddress: "0x000000000000000000000000000000000000dEaD", SettlementChain: "base"})
	require.NoError(t, err)
	m := reg.Merchant
	require.Equal(t, "Signed Up Shop", m.Name)
	require.Equal(t, "0x000000000000000000000000000000000000dEaD", m.SettlementAddress)
	require.Equal(t, "base", m.SettlementChain)
	require.Nil(t, m.EmailVerifiedAt, "the contact e-mail is unconfirmed until its link is followed")
	require.Equal(t, h.svc.cfg.AppURL+"/dashboard", reg.DashboardURL)

	// Keys: both modes, the secrets only in the answer (hashes at rest).
	require.True(t, strings.HasPrefix(reg.Keys.LiveSecretKey, vault.PrefixSecretLive))
	require.True(t, strings.HasPrefix(reg.Keys.TestSecretKey, vault.PrefixSecretTest))
	keys, err := h.env.DB.Ent.MerchantKey.Query().Where(merchantkey.MerchantID(m.ID)).All(ctx)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	for _, k := range keys {
		require.NotContains(t, string(k.SecretKeyHash), reg.Keys.LiveSecretKey)
		require.Equal(t, vault.HashSecret(map[merchantkey.Kind]string{merchantkey.KindLive: reg.Keys.LiveSecretKey,
			merchantkey.KindTest: reg.Keys.TestSecretKey}[k.Kind]), k.SecretKeyHash)
	}
	auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	require.Equal(t, ModeTest, auth.Mode)

	// The confirmation link went to the contact address, in the sign-up's
	// transaction.
	mails := h.outbox(t, "billing@shop.example")
	require.Len(t, mails, 1)
	require.Contains(t, mails[0].Text, h.svc.cfg.AppURL+"/confirm-email/")

	// The person owns it now, before any confirmation.
	ms, err := h.svc.MerchantsOf(ctx, v)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, m.ID, ms[0].Merchant.ID)
	require.Equal(t, RoleOwner, ms[0].Role)
	_, err = h.svc.OpenDashboard(ctx, v, m.ID, ModeLive)
	require.NoError(t, err)

	// The contact address confirmed: its account owns it too; the
	// person still does, and still after the contact e-mail changes.
	_, err = h.svc.ConfirmMerchantEmail(ctx, h.merchantEmailToken(t, "billing@shop.example"))
	require.NoError(t, err)
	live, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	other := "new.billing@shop.example"
	_, err = h.svc.UpdateMerchant(ctx, live, MerchantInput{Email: &other})
	require.NoError(t, err)
	ms, err = h.svc.MerchantsOf(ctx, v)
	require.NoError(t, err)
	require.Len(t, ms, 1, "the person who signed it up keeps owning it")
	require.Equal(t, RoleOwner, ms[0].Role)
	verified, err := h.env.DB.Ent.Merchant.Query().Where(merchant.ID(m.ID)).Only(ctx)
	require.NoError(t, err)
	require.Nil(t, verified.EmailVerifiedAt)
}

// TestLandingOf: a person who manages a merchant and has no pairing and no
// wallet lands on the dashboard; anyone else on the home page.
func TestLandingOf(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	nobody := h.viewer(t, h.user(t, "nobody"))
	got, err := h.svc.LandingOf(ctx, nobody)
	require.NoError(t, err)
	require.Equal(t, LandingHome, got, "not a merchant")

	seller := h.viewer(t, h.user(t, "seller"))
	_, err = h.svc.SignUpMerchant(ctx, seller, MerchantSignup{Name: "Seller", Email: "seller.shop@example.com"})
	require.NoError(t, err)
	got, err = h.svc.LandingOf(ctx, seller)
	require.NoError(t, err)
	require.Equal(t, LandingDashboard, got, "only a merchant")

	// A merchant who is also paired with an agent is a consumer too.
	a := h.agent(t, "landing")
	_, err = h.svc.RequestPairing(ctx, a, PairingRequest{UserID: seller.User.ID.String()})
	require.NoError(t, err)
	got, err = h.svc.LandingOf(ctx, seller)
	require.NoError(t, err)
	require.Equal(t, LandingHome, got, "a merchant with a pairing")
}
