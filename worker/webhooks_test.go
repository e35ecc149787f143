package worker

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/testenv"
	"agentpay/webhook"
)

// newWebhookHarness is a harness whose jobs are inserted by an insert-only
// River client (as `agentpay serve` does) and worked by the real worker
// (runWorker), with delays between a delivery's tries.
func newWebhookHarness(tb testing.TB, delays []time.Duration) *harness {
	tb.Helper()
	return newHarness(tb, testenv.New(tb, testenv.Options{Jobs: true}), agentpay.Config{WebhookRetryDelays: delays})
}

// merchant registers a merchant whose webhook URL (both modes) is
// webhookURL, and returns it with test mode's webhook secret, the one the
// harness's events (test mode unless said otherwise) are signed with.
func (h *harness) merchant(tb testing.TB, webhookURL string) (*ent.Merchant, string) {
	tb.Helper()
	name, email := "Shop", "shop@example.com"
	reg, err := h.svc.RegisterMerchant(context.Background(), agentpay.MerchantInput{Name: &name, Email: &email, WebhookURL: &webhookURL})
	require.NoError(tb, err)
	return reg.Merchant, reg.Keys.TestWebhookSecret
}

// record writes n payment.confirmed events in one transaction, as a state
// change would.
func (h *harness) record(tb testing.TB, m *ent.Merchant, n int) []*ent.WebhookEvent {
	tb.Helper()
	amount := decimal.RequireFromString("12.34")
	var out []*ent.WebhookEvent
	err := h.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		for i := 0; i < n; i++ {
			ev, err := h.svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
				MerchantID: m.ID, Type: agentpay.EventPaymentConfirmed,
				Data: agentpay.EventData{
					SessionExternalID: "cs_" + uuid.NewString(), PaymentExternalID: "pay_1",
					AmountUSD: &amount, AmountToken: &amount, Token: "USDC", Chain: "base",
					TxHash: "0xabc", FromAddress: "0xdef", Metadata: map[string]any{"i": i},
				},
			})
			if err != nil {
				return err
			}
			out = append(out, ev)
		}
		return nil
	})
	require.NoError(tb, err)
	return out
}

func (h *harness) deliveries(tb testing.TB, eventID uuid.UUID) []*ent.WebhookDelivery {
	tb.Helper()
	ds, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(eventID)).
		Order(webhookdelivery.ByCreatedAt()).All(context.Background())
	require.NoError(tb, err)
	return ds
}

// TestWebhookRetriesThenFails: a receiver that always answers 500 gets the
// first try at once and five retries at the configured delays, then the
// delivery is failed with six attempts logged; a redelivery sends it again.
func TestWebhookRetriesThenFails(t *testing.T) {
	t.Parallel()
	delays := []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond, 900 * time.Millisecond}
	h := newWebhookHarness(t, delays)
	rcv := testenv.NewReceiver(t, http.StatusInternalServerError)
	m, secret := h.merchant(t, rcv.URL+"/hooks")
	ev := h.record(t, m, 1)[0]
	h.runWorker(t)
	started := time.Now()

	require.Eventually(t, func() bool {
		d := h.deliveries(t, ev.ID)[0]
		return d.Status == webhookdelivery.StatusFailed
	}, 30*time.Second, 20*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // longer than any delay: nothing more comes
	got := rcv.Requests()
	require.Len(t, got, 6, "the first try and five retries")

	// The poll interval (200 ms on SQLite, 250 ms on PostgreSQL) and the
	// River fetch add latency on top of each delay, more on a loaded
	// machine; the lower bounds are exact.
	const slack = 3 * time.Second
	t.Logf("first try %s after the worker started", got[0].At.Sub(started).Round(time.Millisecond))
	require.Less(t, got[0].At.Sub(started), slack, "the first try is immediate")
	for i, d := range delays {
		gap := got[i+1].At.Sub(got[i].At)
		t.Logf("retry %d: configured %s, observed %s", i+1, d, gap.Round(time.Millisecond))
		require.GreaterOrEqual(t, gap, d, "retry %d after %s", i+1, d)
		require.Less(t, gap, d+slack, "retry %d after %s", i+1, d)
	}
	for _, r := range got {
		require.Equal(t, ev.Payload, r.Body)
		require.Equal(t, ev.ID.String(), r.Header.Get("webhook-id"))
		require.NoError(t, webhook.Verify(secret, r.Body, r.Header.Get("X-Checkout-Signature")))
	}

	d := h.deliveries(t, ev.ID)[0]
	require.Equal(t, 6, d.Attempts)
	require.NotNil(t, d.CompletedAt)
	attempts, err := h.db.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(d.ID)).
		Order(webhookattempt.ByAt()).All(context.Background())
	require.NoError(t, err)
	require.Len(t, attempts, 6)
	for _, a := range attempts {
		require.Equal(t, 500, a.StatusCode)
		require.Contains(t, a.Error, "500")
	}

	// The merchant fixes its endpoint and asks for the event again.
	rcv.SetStatus(http.StatusOK)
	re, err := h.svc.RedeliverWebhook(context.Background(), m.ID, ev.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := h.db.Ent.WebhookDelivery.Get(context.Background(), re.ID)
		return err == nil && d.Status == webhookdelivery.StatusSucceeded
	}, 10*time.Second, 20*time.Millisecond)
	got = rcv.Requests()
	require.Len(t, got, 7)
	require.Equal(t, ev.Payload, got[6].Body)
	require.Equal(t, webhookdelivery.StatusFailed, h.deliveries(t, ev.ID)[0].Status, "the first series stays failed")
}

// TestWebhookDeliveredOnce: a receiver that answers 200 gets each event
// exactly once.
func TestWebhookDeliveredOnce(t *testing.T) {
	t.Parallel()
	h := newWebhookHarness(t, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, secret := h.merchant(t, rcv.URL)
	events := h.record(t, m, 50)
	h.runWorker(t)
	more := h.record(t, m, 50) // recorded while the worker runs
	events = append(events, more...)

	require.Eventually(t, func() bool {
		n, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusSucceeded)).Count(context.Background())
		return err == nil && n == len(events)
	}, 30*time.Second, 20*time.Millisecond)
	time.Sleep(time.Second)

	seen := map[string]int{}
	for _, r := range rcv.Requests() {
		seen[r.Header.Get("webhook-id")]++
		require.NoError(t, webhook.Verify(secret, r.Body, r.Header.Get("X-Checkout-Signature")))
	}
	require.Len(t, seen, len(events))
	for _, ev := range events {
		require.Equal(t, 1, seen[ev.ID.String()], "event %s", ev.ID)
		d := h.deliveries(t, ev.ID)
		require.Len(t, d, 1)
		require.Equal(t, 1, d[0].Attempts)
	}
}

// TestWebhookLiveLoopbackRefused: through the worker, a live event to a
// loopback receiver never reaches it; each try is logged as refused.
func TestWebhookLiveLoopbackRefused(t *testing.T) {
	t.Parallel()
	h := newWebhookHarness(t, []time.Duration{50 * time.Millisecond})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, _ := h.merchant(t, rcv.URL)
	var ev *ent.WebhookEvent
	require.NoError(t, h.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		ev, err = h.svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
			MerchantID: m.ID, Type: agentpay.EventSessionExpired, Livemode: true,
			Data: agentpay.EventData{SessionExternalID: "cs_live"},
		})
		return err
	}))
	h.runWorker(t)
	require.Eventually(t, func() bool {
		return h.deliveries(t, ev.ID)[0].Status == webhookdelivery.StatusFailed
	}, 20*time.Second, 20*time.Millisecond)
	require.Empty(t, rcv.Requests())
	attempts, err := h.db.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(h.deliveries(t, ev.ID)[0].ID)).All(context.Background())
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	for _, a := range attempts {
		require.Zero(t, a.StatusCode)
		require.Contains(t, a.Error, "not a public address")
	}
}
