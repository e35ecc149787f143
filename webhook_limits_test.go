package agentpay

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// TestDeliverWebhookAtCap: a delivery whose merchant is at its cap sends
// nothing and counts no try (Busy); once a slot is free it goes.
func TestDeliverWebhookAtCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{WebhookMerchantConcurrency: 1})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, rcv.URL)
	d := onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID)
	busy := func() {
		t.Helper()
		res, err := svc.DeliverWebhook(ctx, d.ID)
		require.NoError(t, err)
		require.True(t, res.Busy)
		require.False(t, res.Done)
		require.Nil(t, res.Attempt)
		require.Empty(t, rcv.Requests())
		stored := onlyDelivery(t, svc, d.EventID)
		require.Equal(t, webhookdelivery.StatusPending, stored.Status)
		require.Zero(t, stored.Attempts, "waiting for a slot is not a try")
	}

	// A try of m's test mode is in flight in this process, and the one
	// place to wait for it is taken too.
	key := webhookGateKey{merchantID: m.ID, livemode: false}
	require.True(t, svc.webhookGates.Enter(ctx, key, 0))
	waiting := make(chan bool)
	go func() { waiting <- svc.webhookGates.Enter(ctx, key, time.Minute) }()
	require.Eventually(t, func() bool { return svc.WebhookSlotsFull(m.ID, false) }, 10*time.Second, time.Millisecond)
	require.False(t, svc.WebhookSlotsFull(m.ID, true), "live mode is counted apart")
	busy()
	svc.webhookGates.Leave(key)
	require.True(t, <-waiting)
	svc.webhookGates.Leave(key)
	require.False(t, svc.WebhookSlotsFull(m.ID, false))

	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.False(t, res.Busy)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	require.Len(t, rcv.Requests(), 1)
	require.Zero(t, svc.webhookGates.Holders(key), "the recorded try left its place")
}

// TestWebhookBusyDelay: the wait of a delivery at its merchant's cap starts
// short, doubles, and stops growing at 5 s, each wait a random point in the
// upper half of its step.
func TestWebhookBusyDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		waits int
		step  time.Duration
	}{
		{0, 100 * time.Millisecond}, {1, 200 * time.Millisecond}, {2, 400 * time.Millisecond},
		{5, 3200 * time.Millisecond}, {6, 5 * time.Second}, {60, 5 * time.Second}, {-1, 5 * time.Second},
	}
	for _, tt := range tests {
		for range 100 {
			d := WebhookBusyDelay(tt.waits)
			require.GreaterOrEqual(t, d, tt.step/2, "waits %d", tt.waits)
			require.LessOrEqual(t, d, tt.step, "waits %d", tt.waits)
		}
	}
}

// TestRedeliveryLimits: an event is redelivered at most
// RedeliveriesPerEvent times a clock hour, a merchant's events of one mode
// RedeliveriesPerMerchant times together; a refusal says how long to wait
// and creates nothing; the next hour starts again.
func TestRedeliveryLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewStub(time.Date(2026, 11, 26, 10, 0, 5, 0, time.UTC))
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{Clock: clk})
	m, _ := createWebhookMerchant(t, svc, "https://shop.example.com/hooks")
	events := make([]*ent.WebhookEvent, RedeliveriesPerMerchant/RedeliveriesPerEvent+1)
	for i := range events {
		events[i] = recordTestEvent(t, svc, confirmedEventInput(m, false))
	}
	live := recordTestEvent(t, svc, confirmedEventInput(m, true))
	deliveries := func(ev *ent.WebhookEvent) int {
		return svc.cfg.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(ev.ID)).CountX(ctx)
	}
	refused := func(err error, message string) {
		t.Helper()
		require.ErrorIs(t, err, ErrRateLimited)
		var rl *RateLimitError
		require.ErrorAs(t, err, &rl)
		require.Equal(t, int64(3595), rl.Decision.RetryAfterSeconds(), "until the next clock hour")
		require.EqualError(t, err, message)
	}

	first := events[0]
	for range RedeliveriesPerEvent {
		_, err := svc.RedeliverWebhook(ctx, m.ID, first.ID)
		require.NoError(t, err)
	}
	_, err := svc.RedeliverWebhook(ctx, m.ID, first.ID)
	refused(err, "rate limit exceeded: 10 redeliveries per hour of one event, retry after 3595 s")
	require.Equal(t, 1+RedeliveriesPerEvent, deliveries(first), "a refused redelivery creates nothing")

	// The other events use up the merchant's test-mode hour.
	for _, ev := range events[1 : len(events)-1] {
		for range RedeliveriesPerEvent {
			_, err := svc.RedeliverWebhook(ctx, m.ID, ev.ID)
			require.NoError(t, err)
		}
	}
	last := events[len(events)-1]
	_, err = svc.RedeliverWebhook(ctx, m.ID, last.ID)
	refused(err, "rate limit exceeded: 100 redeliveries per hour of one merchant's test events, retry after 3595 s")
	require.Equal(t, 1, deliveries(last))
	_, err = svc.RedeliverWebhook(ctx, m.ID, live.ID)
	require.NoError(t, err, "live mode is counted apart")

	clk.Set(time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))
	_, err = svc.RedeliverWebhook(ctx, m.ID, first.ID)
	require.NoError(t, err, "a new hour")
	_, err = svc.RedeliverWebhook(ctx, m.ID, last.ID)
	require.NoError(t, err)
}

// TestTestWebhookLimits: a merchant sends at most TestWebhooksPerMerchant
// test events a clock hour per mode, as redeliveries are limited; a
// refusal says how long to wait and records nothing; the other mode is
// counted apart; the next hour starts again.
func TestTestWebhookLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewStub(time.Date(2026, 11, 26, 10, 0, 5, 0, time.UTC))
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{Clock: clk})
	m, _ := createWebhookMerchant(t, svc, "https://shop.example.com/hooks")
	test, live := &MerchantAuth{Merchant: m, Mode: ModeTest}, &MerchantAuth{Merchant: m, Mode: ModeLive}
	events := func() int {
		return svc.cfg.DB.Ent.WebhookEvent.Query().Where(webhookevent.MerchantID(m.ID), webhookevent.EventType(EventWebhookTest)).CountX(ctx)
	}
	for range TestWebhooksPerMerchant {
		_, err := svc.SendTestWebhook(ctx, test)
		require.NoError(t, err)
	}
	_, err := svc.SendTestWebhook(ctx, test)
	require.ErrorIs(t, err, ErrRateLimited)
	var rl *RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, int64(3595), rl.Decision.RetryAfterSeconds(), "until the next clock hour")
	require.EqualError(t, err, "rate limit exceeded: 20 test events per hour of one merchant in test mode, retry after 3595 s")
	require.Equal(t, TestWebhooksPerMerchant, events(), "a refused test event is not recorded")

	_, err = svc.SendTestWebhook(ctx, live)
	require.NoError(t, err, "live mode is counted apart")
	clk.Advance(time.Hour)
	_, err = svc.SendTestWebhook(ctx, test)
	require.NoError(t, err, "a new hour")
	require.Equal(t, TestWebhooksPerMerchant+2, events())
}
