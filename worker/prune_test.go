package worker

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent/dashboardsession"
	"agentpay/ent/passkeyceremony"
	"agentpay/ent/signaturechallenge"
)

// TestWorkerPrunesSignatureChallenges: the periodic job (run when the
// worker starts) deletes expired challenges and keeps the others.
func TestWorkerPrunesSignatureChallenges(t *testing.T) {
	ctx := context.Background()
	h := newWebhookHarness(t, nil) // a service and the real worker; no webhooks here
	challenge := func(nonce string, expires time.Time) {
		h.db.Ent.SignatureChallenge.Create().SetPurpose(signaturechallenge.PurposeRegister).SetNonce(nonce).
			SetUsername("someone").SetWalletAddress("0x0000000000000000000000000000000000000001").
			SetExpiresAt(expires.UTC()).SaveX(ctx)
	}
	challenge("0xexpired", time.Now().Add(-time.Minute))
	challenge("0xvalid", time.Now().Add(time.Minute))

	h.runWorker(t)
	require.Eventually(t, func() bool {
		n, err := h.db.Ent.SignatureChallenge.Query().Count(ctx)
		return err == nil && n == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, "0xvalid", h.db.Ent.SignatureChallenge.Query().OnlyX(ctx).Nonce)
}

// TestWorkerPrunesIdempotencyKeys: the periodic job (run when the worker
// starts) deletes idempotency keys past their 24 hours and keeps the
// others.
func TestWorkerPrunesIdempotencyKeys(t *testing.T) {
	ctx := context.Background()
	h := newWebhookHarness(t, nil) // a service and the real worker; no webhooks here
	key := func(k string, expires time.Time) {
		h.db.Ent.IdempotencyKey.Create().SetScope("agent:" + uuid.NewString()).SetKey(k).SetOperation("send").
			SetFingerprint(make([]byte, 32)).SetLockedUntil(time.Now().UTC()).
			SetExpiresAt(expires.UTC()).SaveX(ctx)
	}
	key("expired", time.Now().Add(-time.Minute))
	key("kept", time.Now().Add(time.Minute))

	h.runWorker(t)
	require.Eventually(t, func() bool {
		n, err := h.db.Ent.IdempotencyKey.Query().Count(ctx)
		return err == nil && n == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, "kept", h.db.Ent.IdempotencyKey.Query().OnlyX(ctx).Key)
}

// TestWorkerPrunesPasskeyCeremonies: the periodic job (run when the worker
// starts) deletes expired passkey ceremonies and keeps the others.
func TestWorkerPrunesPasskeyCeremonies(t *testing.T) {
	ctx := context.Background()
	h := newWebhookHarness(t, nil) // a service and the real worker; no webhooks here
	ceremony := func(expires time.Time) uuid.UUID {
		return h.db.Ent.PasskeyCeremony.Create().SetPurpose(passkeyceremony.PurposeSignin).
			SetSessionData([]byte(`{}`)).SetExpiresAt(expires.UTC()).SaveX(ctx).ID
	}
	ceremony(time.Now().Add(-time.Minute))
	kept := ceremony(time.Now().Add(time.Minute))

	h.runWorker(t)
	require.Eventually(t, func() bool {
		n, err := h.db.Ent.PasskeyCeremony.Query().Count(ctx)
		return err == nil && n == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, kept, h.db.Ent.PasskeyCeremony.Query().OnlyX(ctx).ID)
}

// TestWorkerPrunesDashboardSessions: the periodic job (run when the worker
// starts) deletes expired dashboard sessions and keeps the others.
func TestWorkerPrunesDashboardSessions(t *testing.T) {
	ctx := context.Background()
	h := newWebhookHarness(t, nil) // a service and the real worker; no webhooks here
	m := h.db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	u := h.db.Ent.User.Create().SetUsername("member").SetEmail("member@example.com").SaveX(ctx)
	bs := h.db.Ent.BrowserSession.Create().SetUserID(u.ID).SetTokenHash([]byte("browser")).
		SetExpiresAt(time.Now().Add(time.Hour).UTC()).SaveX(ctx)
	session := func(hash string, expires time.Time) uuid.UUID {
		return h.db.Ent.DashboardSession.Create().SetMerchantID(m.ID).SetUserID(u.ID).SetBrowserSessionID(bs.ID).
			SetMode(dashboardsession.ModeTest).SetTokenHash([]byte(hash)).SetExpiresAt(expires.UTC()).SaveX(ctx).ID
	}
	session("expired", time.Now().Add(-time.Minute))
	kept := session("kept", time.Now().Add(time.Minute))

	h.runWorker(t)
	require.Eventually(t, func() bool {
		n, err := h.db.Ent.DashboardSession.Query().Count(ctx)
		return err == nil && n == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, kept, h.db.Ent.DashboardSession.Query().OnlyX(ctx).ID)
}
