package worker

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/webhookevent"
	"agentpay/internal/testenv"
)

// TestWorkerExpiresSessions runs the River client and checks the periodic
// expiry job expires a session past its deadline with session.expired.
func TestWorkerExpiresSessions(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, testenv.New(t, testenv.Options{}), agentpay.Config{})
	db := h.db

	m := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	sess := db.Ent.CheckoutSession.Create().SetMerchantID(m.ID).SetExternalID("cs_test_expiry").
		SetLivemode(false).SetAmountUsd(decimal.RequireFromString("3")).SetCurrency("USD").
		SetExpiresAt(time.Now().Add(-time.Second).UTC()).SaveX(ctx)

	stop := h.startWorker(t, Config{})

	require.Eventually(t, func() bool {
		s, err := db.Ent.CheckoutSession.Get(ctx, sess.ID)
		return err == nil && s.Status == checkoutsession.StatusExpired
	}, 20*time.Second, 50*time.Millisecond)
	n, err := db.Ent.WebhookEvent.Query().
		Where(webhookevent.SessionID(sess.ID), webhookevent.EventType(agentpay.EventSessionExpired)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	stop()
}
