package agentpay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
	"agentpay/webhook"
)

// legacySecret is a webhook secret of the form issued before the Standard
// Webhooks one ("whsec_" and 43 base62 characters), as existing merchants
// still hold it.
const legacySecret = "whsec_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg"

// newEndpointTestService is a service over a fresh database with the given
// clock (nil: the system's) and an insert-only River client; tests call
// DeliverWebhook themselves. Its live client may reach loopback receivers:
// these tests are about where and how deliveries are signed, and the
// address rule has its own (TestDeliverWebhookAddressRule).
func newEndpointTestService(t *testing.T, clk clock.Clock) *Service {
	t.Helper()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{Clock: clk})
	svc.liveWebhooks = svc.testWebhooks
	return svc
}

// registerWithWebhook registers a merchant whose webhook URL (both modes) is
// url, and authenticates both its secret keys.
func registerWithWebhook(t *testing.T, svc *Service, url string) (reg *MerchantRegistration, live, test *MerchantAuth) {
	t.Helper()
	ctx := context.Background()
	reg, err := svc.RegisterMerchant(ctx, MerchantInput{Name: strp("Acme"), Email: strp("a@acme.test"), WebhookURL: &url})
	require.NoError(t, err)
	live, err = svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)
	test, err = svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	return reg, live, test
}

// deliverOne records an event of the given mode for m, sends its delivery
// and returns what the receiver got (nil when no delivery was made).
func deliverOne(t *testing.T, svc *Service, rcv *testenv.Receiver, m *ent.Merchant, live bool) *testenv.Request {
	t.Helper()
	before := len(rcv.Requests())
	ev := recordTestEvent(t, svc, confirmedEventInput(m, live))
	ds, err := svc.WebhookDeliveries(context.Background(), ev.ID)
	require.NoError(t, err)
	if len(ds) == 0 {
		return nil
	}
	res, err := svc.DeliverWebhook(context.Background(), ds[0].ID)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	got := rcv.Requests()
	require.Len(t, got, before+1)
	return &got[before]
}

// verifies reports whether secret verifies a received delivery, by both
// signatures.
func verifies(r *testenv.Request, secret string, now time.Time) (standard, checkout bool) {
	return webhook.VerifyStandard(secret, r.Header, r.Body, 0, now) == nil,
		webhook.Verify(secret, r.Body, r.Header.Get(webhook.HeaderCheckoutSignature)) == nil
}

// TestWebhookEndpointPerMode: each mode's events go to that mode's URL,
// signed with that mode's secret only. A test key sets the test URL and
// never the live one, so what it points elsewhere is signed with a secret
// the live receiver does not trust.
func TestWebhookEndpointPerMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newEndpointTestService(t, nil)
	shared := testenv.NewReceiver(t, http.StatusOK)
	elsewhere := testenv.NewReceiver(t, http.StatusOK)
	reg, liveAuth, testAuth := registerWithWebhook(t, svc, shared.URL+"/hooks")
	require.Equal(t, shared.URL+"/hooks", reg.Merchant.WebhookURL, "registration sets both modes")
	require.Equal(t, shared.URL+"/hooks", reg.Merchant.TestWebhookURL)

	// A test key moves test mode's URL only.
	m, err := svc.UpdateMerchant(ctx, testAuth, MerchantInput{WebhookURL: strp(elsewhere.URL + "/test")})
	require.NoError(t, err)
	require.Equal(t, shared.URL+"/hooks", m.WebhookURL)
	require.Equal(t, elsewhere.URL+"/test", m.TestWebhookURL)
	for _, tt := range []struct {
		mode Mode
		url  string
	}{{ModeLive, shared.URL + "/hooks"}, {ModeTest, elsewhere.URL + "/test"}} {
		p, err := svc.MerchantProfile(ctx, m, tt.mode)
		require.NoError(t, err)
		require.Equal(t, tt.url, p.WebhookURL, "a key sees its own mode's URL")
	}

	now := time.Now()
	testDelivery := deliverOne(t, svc, elsewhere, m, false)
	std, chk := verifies(testDelivery, reg.Keys.TestWebhookSecret, now)
	require.True(t, std && chk, "a test delivery is signed with the test secret")
	std, chk = verifies(testDelivery, reg.Keys.WebhookSecret, now)
	require.False(t, std || chk, "and never with the live secret")
	require.Equal(t, "v1,", testDelivery.Header.Get("webhook-signature")[:3])
	require.NotContains(t, testDelivery.Header.Get("webhook-signature"), " ", "one signature: no rotation under way")

	liveDelivery := deliverOne(t, svc, shared, m, true)
	std, chk = verifies(liveDelivery, reg.Keys.WebhookSecret, now)
	require.True(t, std && chk, "a live delivery is signed with the live secret")
	std, chk = verifies(liveDelivery, reg.Keys.TestWebhookSecret, now)
	require.False(t, std || chk)

	// A live key moves live mode's URL only; clearing it stops live
	// deliveries and leaves test mode's.
	m, err = svc.UpdateMerchant(ctx, liveAuth, MerchantInput{WebhookURL: strp("")})
	require.NoError(t, err)
	require.Empty(t, m.WebhookURL)
	require.Equal(t, elsewhere.URL+"/test", m.TestWebhookURL)
	require.Nil(t, deliverOne(t, svc, shared, m, true), "no live URL: the event is recorded, not delivered")
	_, err = svc.RedeliverWebhook(ctx, m.ID, recordTestEvent(t, svc, confirmedEventInput(m, true)).ID)
	require.True(t, IsValidation(err), "%v", err)
}

// TestUpdateMerchantTestKeyScope: a test key changes test mode's webhook URL
// and nothing else; every other field is shared with live mode, so naming
// one (even with the value it has) is forbidden and changes nothing. A live
// key changes them all.
func TestUpdateMerchantTestKeyScope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newEndpointTestService(t, nil)
	reg, liveAuth, testAuth := registerWithWebhook(t, svc, "https://shop.example.com/hooks")
	addr, chain := "0x52908400098527886E0F7030069857D2E4169EE7", "base"
	tokens := []TokenRef{{Chain: "base", Token: TokenUSDC}}
	tests := []struct {
		field string
		in    MerchantInput
	}{
		{"name", MerchantInput{Name: strp("Evil")}},
		{"email", MerchantInput{Email: strp("evil@example.com")}},
		{"website", MerchantInput{Website: strp("https://evil.example.com")}},
		{"success_url", MerchantInput{SuccessURL: strp("https://evil.example.com/ok")}},
		{"cancel_url", MerchantInput{CancelURL: strp("https://evil.example.com/no")}},
		{"settlement_type", MerchantInput{SettlementType: strp(SettlementFiatPix)}},
		{"settlement_address", MerchantInput{SettlementAddress: &addr}},
		{"settlement_chain", MerchantInput{SettlementChain: &chain, SettlementAddress: &addr}},
		{"accepted_tokens", MerchantInput{AcceptedTokens: &tokens}},
		{"brand_color", MerchantInput{BrandColor: strp("#000000")}},
		{"name", MerchantInput{Name: strp("Acme")}}, // unchanged value: still refused
		{"settlement_address", MerchantInput{SettlementAddress: &addr, WebhookURL: strp("http://127.0.0.1:9/hook")}},
	}
	// String shows every field but the sealed secrets, updated_at included.
	before := svc.cfg.DB.Ent.Merchant.GetX(ctx, reg.Merchant.ID).String()
	for _, tt := range tests {
		_, err := svc.UpdateMerchant(ctx, testAuth, tt.in)
		require.ErrorIs(t, err, ErrForbidden, tt.field)
		require.Contains(t, err.Error(), tt.field+" need a live secret key")
		require.Equal(t, before, svc.cfg.DB.Ent.Merchant.GetX(ctx, reg.Merchant.ID).String(), "%s: nothing changed", tt.field)
	}

	// Test mode's URL may be a local receiver; live mode's may not.
	m, err := svc.UpdateMerchant(ctx, testAuth, MerchantInput{WebhookURL: strp("http://127.0.0.1:9/hook")})
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9/hook", m.TestWebhookURL)
	require.Equal(t, "https://shop.example.com/hooks", m.WebhookURL)
	_, err = svc.UpdateMerchant(ctx, liveAuth, MerchantInput{WebhookURL: strp("http://127.0.0.1:9/hook")})
	require.True(t, IsValidation(err), "%v", err)

	m, err = svc.UpdateMerchant(ctx, liveAuth, MerchantInput{SettlementAddress: &addr, SettlementChain: &chain, Name: strp("Acme Two")})
	require.NoError(t, err)
	require.Equal(t, addr, m.SettlementAddress)
	require.Equal(t, "Acme Two", m.Name)
	require.Equal(t, "http://127.0.0.1:9/hook", m.TestWebhookURL, "a live key's update leaves test mode's URL")
}

// TestRollWebhookSecret: a roll replaces the key's mode's secret only; the
// replaced secret keeps signing next to the new one until the overlap ends
// (then the new one alone), an overlap of 0 drops it at once, and a roll
// during an overlap drops the secret older than the one it replaces.
func TestRollWebhookSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewStub(time.Now())
	svc := newEndpointTestService(t, clk)
	rcv := testenv.NewReceiver(t, http.StatusOK)
	reg, liveAuth, testAuth := registerWithWebhook(t, svc, rcv.URL)
	liveSealed := reg.Merchant.WebhookSecretEncrypted

	for _, bad := range []int64{-1, 604801} {
		_, err := svc.RollWebhookSecret(ctx, testAuth, &bad)
		require.True(t, IsValidation(err), "%d: %v", bad, err)
		require.EqualError(t, err, "overlap_seconds: must be from 0 to 604800 (7 days)")
	}
	require.Equal(t, reg.Merchant.TestWebhookSecretEncrypted, svc.cfg.DB.Ent.Merchant.GetX(ctx, reg.Merchant.ID).TestWebhookSecretEncrypted,
		"a refused roll changes nothing")

	first := reg.Keys.TestWebhookSecret
	rolled, err := svc.RollWebhookSecret(ctx, testAuth, nil)
	require.NoError(t, err)
	second := rolled.Secret
	require.False(t, rolled.Livemode)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, second)
	require.NotEqual(t, first, second)
	require.NotNil(t, rolled.PreviousExpiresAt)
	require.WithinDuration(t, clk.Now().Add(24*time.Hour), *rolled.PreviousExpiresAt, time.Second)
	m := svc.cfg.DB.Ent.Merchant.GetX(ctx, reg.Merchant.ID)
	require.Equal(t, liveSealed, m.WebhookSecretEncrypted, "the live secret is untouched")
	require.Nil(t, m.WebhookSecretPreviousEncrypted)

	// During the overlap: both secrets verify the Standard Webhooks
	// signature; X-Checkout-Signature is the new secret's.
	r := deliverOne(t, svc, rcv, m, false)
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 2)
	for _, tt := range []struct {
		secret             string
		standard, checkout bool
	}{{second, true, true}, {first, true, false}, {reg.Keys.WebhookSecret, false, false}} {
		std, chk := verifies(r, tt.secret, clk.Now())
		require.Equal(t, tt.standard, std)
		require.Equal(t, tt.checkout, chk)
	}
	// Live deliveries are not affected by the test roll.
	r = deliverOne(t, svc, rcv, m, true)
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 1)
	std, chk := verifies(r, reg.Keys.WebhookSecret, clk.Now())
	require.True(t, std && chk)

	// After the overlap: the new secret alone.
	clk.Advance(24*time.Hour + time.Second)
	r = deliverOne(t, svc, rcv, m, false)
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 1)
	std, _ = verifies(r, first, clk.Now())
	require.False(t, std)
	std, _ = verifies(r, second, clk.Now())
	require.True(t, std)

	// A roll during an overlap: the secret it replaces overlaps, the one
	// before that stops at once.
	rolled, err = svc.RollWebhookSecret(ctx, testAuth, nil)
	require.NoError(t, err)
	third := rolled.Secret
	rolled, err = svc.RollWebhookSecret(ctx, testAuth, nil)
	require.NoError(t, err)
	fourth := rolled.Secret
	r = deliverOne(t, svc, rcv, m, false)
	for secret, want := range map[string]bool{second: false, third: true, fourth: true} {
		std, _ := verifies(r, secret, clk.Now())
		require.Equal(t, want, std)
	}

	// An overlap of 0 (a leaked secret): the replaced secret stops at once.
	zero := int64(0)
	rolled, err = svc.RollWebhookSecret(ctx, testAuth, &zero)
	require.NoError(t, err)
	require.Nil(t, rolled.PreviousExpiresAt)
	r = deliverOne(t, svc, rcv, m, false)
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 1)
	std, _ = verifies(r, fourth, clk.Now())
	require.False(t, std)
	std, _ = verifies(r, rolled.Secret, clk.Now())
	require.True(t, std)

	// A live key rolls the live secret, leaving test mode's.
	testSealed := svc.cfg.DB.Ent.Merchant.GetX(ctx, reg.Merchant.ID).TestWebhookSecretEncrypted
	liveRolled, err := svc.RollWebhookSecret(ctx, liveAuth, nil)
	require.NoError(t, err)
	require.True(t, liveRolled.Livemode)
	m = svc.cfg.DB.Ent.Merchant.GetX(ctx, reg.Merchant.ID)
	require.Equal(t, testSealed, m.TestWebhookSecretEncrypted)
	r = deliverOne(t, svc, rcv, m, true)
	for secret, want := range map[string]bool{liveRolled.Secret: true, reg.Keys.WebhookSecret: true, rolled.Secret: false} {
		std, _ := verifies(r, secret, clk.Now())
		require.Equal(t, want, std)
	}

	// A deactivated merchant cannot roll.
	_, err = svc.DeactivateMerchant(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	_, err = svc.RollWebhookSecret(ctx, liveAuth, nil)
	require.ErrorIs(t, err, ErrForbidden)
}

// TestLegacyWebhookSecret: a merchant registered before each mode had its
// own secret, as the migration leaves it (its one secret in the earlier
// form, live mode's; test mode without URL or secret). Live deliveries keep
// the signatures its receiver already verifies, byte for byte; test events
// are not delivered until a test key rolls a test secret, and a test URL is
// refused before then.
func TestLegacyWebhookSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newEndpointTestService(t, nil)
	rcv := testenv.NewReceiver(t, http.StatusOK)
	reg, _, testAuth := registerWithWebhook(t, svc, rcv.URL)
	// A test delivery made before the migration, to the URL both modes
	// shared, still pending.
	pending := onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(reg.Merchant, false)).ID)
	sealed, err := svc.cfg.Vault.Seal([]byte(legacySecret), reg.Merchant.ID[:])
	require.NoError(t, err)
	m := svc.cfg.DB.Ent.Merchant.UpdateOneID(reg.Merchant.ID).
		SetWebhookSecretEncrypted(sealed).
		ClearTestWebhookURL().ClearTestWebhookSecretEncrypted().
		SaveX(ctx)

	// It is not signed with the live secret: each try fails unsent, logged.
	res, err := svc.DeliverWebhook(ctx, pending.ID)
	require.NoError(t, err)
	require.False(t, res.Done)
	require.ErrorIs(t, res.Err, errNoWebhookSecret)
	require.Contains(t, res.Attempt.Error, "test mode has no webhook secret yet")
	require.Zero(t, res.Attempt.StatusCode)
	require.Empty(t, rcv.Requests())

	r := deliverOne(t, svc, rcv, m, true)
	mac := hmac.New(sha256.New, []byte(legacySecret))
	mac.Write(r.Body)
	require.Equal(t, hex.EncodeToString(mac.Sum(nil)), r.Header.Get("X-Checkout-Signature"))
	smac := hmac.New(sha256.New, []byte(strings.TrimPrefix(legacySecret, "whsec_")))
	smac.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "."))
	smac.Write(r.Body)
	require.Equal(t, "v1,"+base64.StdEncoding.EncodeToString(smac.Sum(nil)), r.Header.Get("webhook-signature"),
		"the earlier form's key: its characters as they are")
	std, chk := verifies(r, legacySecret, time.Now())
	require.True(t, std && chk)

	require.Nil(t, deliverOne(t, svc, rcv, m, false), "no test endpoint yet")
	_, err = svc.UpdateMerchant(ctx, testAuth, MerchantInput{WebhookURL: strp(rcv.URL)})
	require.True(t, IsValidation(err), "%v", err)
	require.Contains(t, err.Error(), "roll one first")

	rolled, err := svc.RollWebhookSecret(ctx, testAuth, nil)
	require.NoError(t, err)
	require.Nil(t, rolled.PreviousExpiresAt, "nothing to overlap with")
	m, err = svc.UpdateMerchant(ctx, testAuth, MerchantInput{WebhookURL: strp(rcv.URL)})
	require.NoError(t, err)
	r = deliverOne(t, svc, rcv, m, false)
	require.Len(t, strings.Fields(r.Header.Get("webhook-signature")), 1)
	std, chk = verifies(r, rolled.Secret, time.Now())
	require.True(t, std && chk)
	std, chk = verifies(r, legacySecret, time.Now())
	require.False(t, std || chk, "the live secret never signs a test delivery")
}
