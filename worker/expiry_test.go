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
// expiry job expires a session past its deadline with session.expired, and
// records on its deposit address when the session ended (from which the
// scan watches it the late-payment window more).
func TestWorkerExpiresSessions(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, testenv.New(t, testenv.Options{}), agentpay.Config{})
	db := h.db

	m := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)
	sess := db.Ent.CheckoutSession.Create().SetMerchantID(m.ID).SetExternalID("cs_test_expiry").
		SetLivemode(false).SetAmountUsd(decimal.RequireFromString("3")).SetCurrency("USD").
		SetExpiresAt(time.Now().Add(-time.Second).UTC()).SaveX(ctx)
	da := db.Ent.DepositAddress.Create().SetSessionID(sess.ID).SetChain("base").SetChainFamily("evm").
		SetAddress("0x00000000000000000000000000000000000000e1").SetDerivationIndex(0).SaveX(ctx)

	stop := h.startWorker(t, Config{})

	require.Eventually(t, func() bool {
		s, err := db.Ent.CheckoutSession.Get(ctx, sess.ID)
		return err == nil && s.Status == checkoutsession.StatusExpired
	}, 20*time.Second, 50*time.Millisecond)
	n, err := db.Ent.WebhookEvent.Query().
		Where(webhookevent.SessionID(sess.ID), webhookevent.EventType(agentpay.EventSessionExpired)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		a, err := db.Ent.DepositAddress.Get(ctx, da.ID)
		return err == nil && a.SessionEndedAt != nil
	}, 20*time.Second, 50*time.Millisecond)
	expired := db.Ent.CheckoutSession.GetX(ctx, sess.ID)
	require.True(t, expired.ExpiredAt.Equal(*db.Ent.DepositAddress.GetX(ctx, da.ID).SessionEndedAt))

	stop()
}
