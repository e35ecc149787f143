package agentpay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/vault"
)

// A merchant's contact e-mail confers ownership only once its confirmation
// link is followed: GET reads the link, POST spends it, once; it expires;
// it confirms only the address it was sent to, while that is still the
// contact e-mail.
func TestMerchantEmailConfirmation(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	owner := h.user(t, "owner")
	reg := h.unconfirmedMerchantOf(t, owner.Email)
	require.Nil(t, reg.Merchant.EmailVerifiedAt)
	ownerOf := func() bool {
		ms, err := h.svc.MerchantsOf(ctx, h.viewer(t, owner))
		require.NoError(t, err)
		return len(ms) == 1 && ms[0].Merchant.ID == reg.Merchant.ID && ms[0].Role == RoleOwner
	}
	require.False(t, ownerOf(), "a verified account does not own an unconfirmed contact e-mail's merchant")
	_, err := h.svc.OpenDashboard(ctx, h.viewer(t, owner), reg.Merchant.ID, ModeLive)
	require.ErrorIs(t, err, ErrForbidden)

	mails := h.outbox(t, owner.Email)
	require.Len(t, mails, 1, "registration mails the confirmation, in its transaction")
	require.NotNil(t, mails[0].ExpiresAt)
	token := h.merchantEmailToken(t, owner.Email)
	require.True(t, vault.MerchantEmailToken.Valid(token))
	n, err := h.env.DB.Ent.MerchantEmailConfirmation.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	stored, err := h.env.DB.Ent.MerchantEmailConfirmation.Query().Only(ctx)
	require.NoError(t, err)
	require.Equal(t, vault.HashSecret(token), stored.TokenHash, "stored hashed")

	for range 2 {
		link, err := h.svc.CheckMerchantEmailLink(ctx, token)
		require.NoError(t, err, "reading the link does not spend it")
		require.Equal(t, owner.Email, link.Email)
		require.Equal(t, reg.Merchant.Name, link.MerchantName)
	}
	require.False(t, ownerOf())
	_, err = h.svc.ConfirmMerchantEmail(ctx, vault.MerchantEmailToken.New())
	require.ErrorIs(t, err, ErrMerchantEmailLinkInvalid)
	_, err = h.svc.ConfirmMerchantEmail(ctx, token)
	require.NoError(t, err)
	require.True(t, ownerOf())
	_, err = h.svc.ConfirmMerchantEmail(ctx, token)
	require.ErrorIs(t, err, ErrMerchantEmailLinkInvalid, "single use")
	_, err = h.svc.CheckMerchantEmailLink(ctx, token)
	require.ErrorIs(t, err, ErrMerchantEmailLinkInvalid)

	// Saving the confirmed e-mail again mails nothing.
	auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp(owner.Email)})
	require.NoError(t, err)
	require.Len(t, h.outbox(t, owner.Email), 1)
	require.True(t, ownerOf())

	// A link to an address that stopped being the contact e-mail, or one
	// that expired, confirms nothing.
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp("next@example.com")})
	require.NoError(t, err)
	nextLink := h.merchantEmailToken(t, "next@example.com")
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp("third@example.com")})
	require.NoError(t, err)
	_, err = h.svc.ConfirmMerchantEmail(ctx, nextLink)
	require.ErrorIs(t, err, ErrMerchantEmailLinkInvalid, "the address is no longer the contact e-mail")
	thirdLink := h.merchantEmailToken(t, "third@example.com")
	h.env.Clock.Set(h.env.Clock.Now().Add(MerchantEmailConfirmationTTL))
	_, err = h.svc.ConfirmMerchantEmail(ctx, thirdLink)
	require.ErrorIs(t, err, ErrMerchantEmailLinkInvalid, "expired")
	m, err := h.svc.MerchantByID(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.Nil(t, m.EmailVerifiedAt)

	// Saving the unconfirmed e-mail again mails a new link once the last
	// expired, not while one is live.
	require.Len(t, h.outbox(t, "third@example.com"), 1)
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp("third@example.com")})
	require.NoError(t, err)
	require.Len(t, h.outbox(t, "third@example.com"), 2)
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp("third@example.com")})
	require.NoError(t, err)
	require.Len(t, h.outbox(t, "third@example.com"), 2, "one live link at a time")
	_, err = h.svc.ConfirmMerchantEmail(ctx, h.merchantEmailToken(t, "third@example.com"))
	require.NoError(t, err)
}

// Two POSTs of one link at once confirm once.
func TestMerchantEmailConfirmationUsedOnceUnderRace(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	h.unconfirmedMerchantOf(t, "race@example.com")
	token := h.merchantEmailToken(t, "race@example.com")
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = h.svc.ConfirmMerchantEmail(ctx, token) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, ErrMerchantEmailLinkInvalid)
		}
	}
	require.Equal(t, 1, ok)
}

// Changing the contact e-mail mails the new address; one merchant sends
// at most MerchantEmailConfirmationsPerDay such mails a UTC day: past it
// the change is refused and changes nothing. Another merchant has its own
// count; the next day counts anew.
func TestMerchantEmailConfirmationsBounded(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	reg := h.merchantOf(t, "loop@example.com") // the registration's mail counts
	auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	addresses := []string{"a@example.com", "b@example.com"}
	for i := range MerchantEmailConfirmationsPerDay - 1 {
		_, err := h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp(addresses[i%2])})
		require.NoError(t, err, "change %d", i+1)
	}
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp("victim@example.com"), Name: strp("Renamed")})
	require.ErrorIs(t, err, ErrRateLimited)
	require.Contains(t, err.Error(), "5 contact e-mail confirmations per day of one merchant")
	require.Empty(t, h.outbox(t, "victim@example.com"))
	m, err := h.svc.MerchantByID(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.NotEqual(t, "Renamed", m.Name, "nothing changed")
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Name: strp("Renamed")})
	require.NoError(t, err, "a change that mails nothing is not counted")

	other := h.merchantOf(t, "other@example.com")
	oauth, err := h.svc.AuthenticateMerchant(ctx, other.Keys.LiveSecretKey)
	require.NoError(t, err)
	_, err = h.svc.UpdateMerchant(ctx, oauth, MerchantInput{Email: strp("victim@example.com")})
	require.NoError(t, err, "each merchant has its own bound")

	h.env.Clock.Set(h.env.Clock.Now().Add(24 * time.Hour))
	_, err = h.svc.UpdateMerchant(ctx, auth, MerchantInput{Email: strp("victim@example.com")})
	require.NoError(t, err, "the next day counts anew")
}

// Merchants registered before contact e-mails were confirmed by link (the
// migration marks them) are confirmed by their address's first e-mailed
// sign-in; a merchant registered since is not (its own link is the
// confirmation), and nothing but an e-mailed link confirms either.
func TestMerchantEmailConfirmedBySignInBeforeLinks(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	const address = "old@example.com"
	legacy := h.unconfirmedMerchantOf(t, address).Merchant
	_, err := h.env.DB.Ent.Merchant.UpdateOneID(legacy.ID).SetEmailConfirmsOnSignin(true).Save(ctx)
	require.NoError(t, err)
	recent := h.unconfirmedMerchantOf(t, address).Merchant

	u, err := h.svc.CreateUser(ctx, NewUser{Email: address, Username: randomName(t, "old"), EmailVerified: true})
	require.NoError(t, err)
	ms, err := h.svc.MerchantsOf(ctx, h.viewer(t, u))
	require.NoError(t, err)
	require.Empty(t, ms, "a session opened otherwise (a passkey) confirms nothing")

	require.NoError(t, h.svc.RequestSignIn(ctx, address, "192.0.2.1"))
	in, err := h.svc.CompleteSignIn(ctx, h.signInLink(t, address), nil, "")
	require.NoError(t, err)
	v, err := h.svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	ms, err = h.svc.MerchantsOf(ctx, v)
	require.NoError(t, err)
	require.Len(t, ms, 1, "the registered-before merchant only")
	require.Equal(t, legacy.ID, ms[0].Merchant.ID)
	require.Equal(t, RoleOwner, ms[0].Role)
	for id, want := range map[*ent.Merchant]bool{legacy: true, recent: false} {
		m, err := h.svc.MerchantByID(ctx, id.ID)
		require.NoError(t, err)
		require.Equal(t, want, m.EmailVerifiedAt != nil)
		require.False(t, m.EmailConfirmsOnSignin)
	}
}
