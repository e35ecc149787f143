package worker

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
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

// newWebhookHarnessWith is a harness on a bundle built with opts (Jobs
// set), its service configured by cfg.
func newWebhookHarnessWith(tb testing.TB, opts testenv.Options, cfg agentpay.Config) *harness {
	tb.Helper()
	opts.Jobs = true
	return newHarness(tb, testenv.New(tb, opts), cfg)
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
	return h.recordFor(tb, []*ent.Merchant{m}, n)
}

// recordFor writes n payment.confirmed events in one transaction, to the
// merchants in turn.
func (h *harness) recordFor(tb testing.TB, ms []*ent.Merchant, n int) []*ent.WebhookEvent {
	tb.Helper()
	amount := decimal.RequireFromString("12.34")
	var out []*ent.WebhookEvent
	err := h.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		for i := 0; i < n; i++ {
			ev, err := h.svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
				MerchantID: ms[i%len(ms)].ID, Type: agentpay.EventPaymentConfirmed,
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

// TestWebhookPrivateTargetsRefused: through the worker, a live event, and a
// test event unless the operator allows private addresses, never reach a
// loopback receiver; each try is logged with the same generic error, no
// status, no duration: nothing of the network the worker runs in.
func TestWebhookPrivateTargetsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		livemode     bool
		allowPrivate bool
	}{
		{"test mode", false, false},
		{"live mode, private allowed", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newWebhookHarnessWith(t, testenv.Options{PublicWebhooksOnly: !tt.allowPrivate},
				agentpay.Config{WebhookRetryDelays: []time.Duration{50 * time.Millisecond}})
			rcv := testenv.NewReceiver(t, http.StatusOK)
			// The URL was set while private addresses were allowed (or
			// resolves to one now): what counts is the address dialled.
			m, _ := h.merchant(t, "https://shop.example.com/hooks")
			require.NoError(t, h.db.Ent.Merchant.UpdateOneID(m.ID).SetWebhookURL(rcv.URL).SetTestWebhookURL(rcv.URL).Exec(context.Background()))
			var ev *ent.WebhookEvent
			require.NoError(t, h.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
				var err error
				ev, err = h.svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
					MerchantID: m.ID, Type: agentpay.EventSessionExpired, Livemode: tt.livemode,
					Data: agentpay.EventData{SessionExternalID: "cs_1"},
				})
				return err
			}))
			h.runWorker(t)
			require.Eventually(t, func() bool {
				return h.deliveries(t, ev.ID)[0].Status == webhookdelivery.StatusFailed
			}, 20*time.Second, 20*time.Millisecond)
			require.Empty(t, rcv.Requests())
			attempts, err := h.svc.WebhookAttempts(context.Background(), h.deliveries(t, ev.ID)[0].ID)
			require.NoError(t, err)
			require.Len(t, attempts, 2)
			for _, a := range attempts {
				require.Nil(t, agentpay.AttemptStatusCode(a))
				require.Zero(t, a.DurationMs)
				require.Equal(t, "refused: the webhook URL's host does not resolve to a public address", *agentpay.AttemptError(a))
			}
		})
	}
}

// TestWebhookSlowMerchantDoesNotStallOthers: merchant A's receiver hangs
// (it answers only when the test lets it) and A has more deliveries than
// the worker has slots; merchant B's payment.confirmed is still delivered
// while every one of A's tries hangs, because A holds at most its cap of
// workers. A's other deliveries wait without using up tries, and all go
// once A's receiver answers.
func TestWebhookSlowMerchantDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	// A, new, has one try; once it hangs WebhookSlowAfter A is slow and
	// its tries take places in the slow lane, up to its cap, none waiting.
	// The worker has more workers than the lane and one merchant's share.
	const limit, lane, workers, backlog = 2, 2, 7, 12
	h := newWebhookHarnessWith(t, testenv.Options{}, agentpay.Config{WebhookMerchantConcurrency: limit, WebhookSlowConcurrency: lane})

	var (
		mu              sync.Mutex
		hanging, most   int
		requestsA       int
		release         = make(chan struct{})
		releaseOnce     sync.Once
		releaseReceiver = func() { releaseOnce.Do(func() { close(release) }) }
	)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		requestsA++
		hanging++
		most = max(most, hanging)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		hanging--
		mu.Unlock()
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(releaseReceiver) // before Close, which waits for the handlers
	a, _ := h.merchant(t, slow.URL)
	fast := testenv.NewReceiver(t, http.StatusOK)
	b, _ := h.merchant(t, fast.URL)

	eventsA := h.record(t, a, backlog)
	h.startWorker(t, Config{ScanInterval: time.Hour, HeadPollInterval: -1, WebhookConcurrency: workers})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return hanging >= limit }, 20*time.Second, 10*time.Millisecond,
		"A's receiver holds its first tries")

	eventB := h.record(t, b, 1)[0]
	require.Eventually(t, func() bool {
		return h.deliveries(t, eventB.ID)[0].Status == webhookdelivery.StatusSucceeded
	}, 30*time.Second, 10*time.Millisecond, "B's payment.confirmed is delivered")

	// B went through while all of A's tries still hang: none has ended
	// (WebhookTimeout is 10 s), and A never had more than its cap at once.
	attemptsA, err := h.db.Ent.WebhookAttempt.Query().
		Where(webhookattempt.HasDeliveryWith(webhookdelivery.HasEventWith(webhookevent.MerchantID(a.ID)))).Count(context.Background())
	require.NoError(t, err)
	require.Zero(t, attemptsA, "no try of A has ended")
	mu.Lock()
	require.Equal(t, limit, hanging)
	require.Equal(t, limit, requestsA)
	mu.Unlock()
	require.Len(t, fast.Requests(), 1)

	releaseReceiver()
	require.Eventually(t, func() bool {
		for _, ev := range eventsA {
			if h.deliveries(t, ev.ID)[0].Status != webhookdelivery.StatusSucceeded {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "A's deliveries all go once its receiver answers")
	for _, ev := range eventsA {
		require.Equal(t, 1, h.deliveries(t, ev.ID)[0].Attempts, "waiting for a slot used up no try")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, limit, most, "never more than the cap in flight")
	require.Equal(t, backlog, requestsA)
}

// TestWorkerNeedsMoreWebhookWorkersThanOneMerchantHolds: a worker whose
// webhook workers one merchant (its cap trying, as many waiting) and the
// slow lane could all hold does not start.
func TestWorkerNeedsMoreWebhookWorkersThanOneMerchantHolds(t *testing.T) {
	t.Parallel()
	h := newWebhookHarnessWith(t, testenv.Options{}, agentpay.Config{WebhookMerchantConcurrency: 5, WebhookSlowConcurrency: 4})
	_, err := New(Config{DB: h.db, Service: h.svc, WebhookConcurrency: 14})
	require.ErrorContains(t, err, "one merchant may hold 10 of them (twice WEBHOOK_MERCHANT_CONCURRENCY) and slow receivers 4 more (WEBHOOK_SLOW_CONCURRENCY)")
	w, err := New(Config{DB: h.db, Service: h.svc, WebhookConcurrency: 15})
	require.NoError(t, err)
	require.NotNil(t, w)
}
