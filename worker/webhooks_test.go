package worker

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains/adapters"
	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/vault"
	"agentpay/webhook"
)

// hookReceiver is a merchant's webhook endpoint on loopback.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []hookRequest
	status int
}

type hookRequest struct {
	at        time.Time
	eventID   string
	signature string
	body      []byte
}

func newHookReceiver(tb testing.TB, status int) *hookReceiver {
	tb.Helper()
	r := &hookReceiver{status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, hookRequest{
			at: time.Now(), eventID: req.Header.Get("webhook-id"),
			signature: req.Header.Get("X-Checkout-Signature"), body: body,
		})
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	tb.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

func (r *hookReceiver) setStatus(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// webhookHarness is a service on the test database whose jobs are inserted
// by an insert-only River client (as `agentpay serve` does) and worked by
// the real worker (as `agentpay worker` does).
type webhookHarness struct {
	db  *store.DB
	svc *agentpay.Service
}

func newWebhookHarness(tb testing.TB, delays []time.Duration) *webhookHarness {
	tb.Helper()
	db := testdb.Open(tb)
	key, err := vault.GenerateMasterKey()
	require.NoError(tb, err)
	v, err := vault.New(key)
	require.NoError(tb, err)
	jobs, err := river.NewClient(db.RiverDriver(), &river.Config{})
	require.NoError(tb, err)
	svc, err := agentpay.NewService(agentpay.Config{
		DB: db, Vault: v, Jobs: jobs, WebhookRetryDelays: delays, Families: adapters.Families(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(tb, err)
	return &webhookHarness{db: db, svc: svc}
}

// runWorker starts the worker until the test ends.
func (h *webhookHarness) runWorker(tb testing.TB) {
	tb.Helper()
	w, err := New(Config{DB: h.db, Service: h.svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ScanInterval: time.Hour})
	require.NoError(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(tb, err)
		case <-time.After(40 * time.Second):
			tb.Error("worker did not stop")
		}
	})
}

// merchant registers a merchant whose webhook URL (both modes) is
// webhookURL, and returns it with test mode's webhook secret, the one the
// harness's events (test mode unless said otherwise) are signed with.
func (h *webhookHarness) merchant(tb testing.TB, webhookURL string) (*ent.Merchant, string) {
	tb.Helper()
	name, email := "Shop", "shop@example.com"
	reg, err := h.svc.RegisterMerchant(context.Background(), agentpay.MerchantInput{Name: &name, Email: &email, WebhookURL: &webhookURL})
	require.NoError(tb, err)
	return reg.Merchant, reg.Keys.TestWebhookSecret
}

// record writes n payment.confirmed events in one transaction, as a state
// change would.
func (h *webhookHarness) record(tb testing.TB, m *ent.Merchant, n int) []*ent.WebhookEvent {
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

func (h *webhookHarness) deliveries(tb testing.TB, eventID uuid.UUID) []*ent.WebhookDelivery {
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
	rcv := newHookReceiver(t, http.StatusInternalServerError)
	m, secret := h.merchant(t, rcv.URL+"/hooks")
	ev := h.record(t, m, 1)[0]
	h.runWorker(t)
	started := time.Now()

	require.Eventually(t, func() bool {
		d := h.deliveries(t, ev.ID)[0]
		return d.Status == webhookdelivery.StatusFailed
	}, 30*time.Second, 20*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // longer than any delay: nothing more comes
	got := rcv.requests()
	require.Len(t, got, 6, "the first try and five retries")

	// The poll interval (200 ms on SQLite, 250 ms on PostgreSQL) and the
	// River fetch add latency on top of each delay, more on a loaded
	// machine; the lower bounds are exact.
	const slack = 3 * time.Second
	t.Logf("first try %s after the worker started", got[0].at.Sub(started).Round(time.Millisecond))
	require.Less(t, got[0].at.Sub(started), slack, "the first try is immediate")
	for i, d := range delays {
		gap := got[i+1].at.Sub(got[i].at)
		t.Logf("retry %d: configured %s, observed %s", i+1, d, gap.Round(time.Millisecond))
		require.GreaterOrEqual(t, gap, d, "retry %d after %s", i+1, d)
		require.Less(t, gap, d+slack, "retry %d after %s", i+1, d)
	}
	for _, r := range got {
		require.Equal(t, ev.Payload, r.body)
		require.Equal(t, ev.ID.String(), r.eventID)
		require.NoError(t, webhook.Verify(secret, r.body, r.signature))
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
	rcv.setStatus(http.StatusOK)
	re, err := h.svc.RedeliverWebhook(context.Background(), m.ID, ev.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := h.db.Ent.WebhookDelivery.Get(context.Background(), re.ID)
		return err == nil && d.Status == webhookdelivery.StatusSucceeded
	}, 10*time.Second, 20*time.Millisecond)
	got = rcv.requests()
	require.Len(t, got, 7)
	require.Equal(t, ev.Payload, got[6].body)
	require.Equal(t, webhookdelivery.StatusFailed, h.deliveries(t, ev.ID)[0].Status, "the first series stays failed")
}

// TestWebhookDeliveredOnce: a receiver that answers 200 gets each event
// exactly once.
func TestWebhookDeliveredOnce(t *testing.T) {
	t.Parallel()
	h := newWebhookHarness(t, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond})
	rcv := newHookReceiver(t, http.StatusOK)
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
	for _, r := range rcv.requests() {
		seen[r.eventID]++
		require.NoError(t, webhook.Verify(secret, r.body, r.signature))
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
	rcv := newHookReceiver(t, http.StatusOK)
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
	require.Empty(t, rcv.requests())
	attempts, err := h.db.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(h.deliveries(t, ev.ID)[0].ID)).All(context.Background())
	require.NoError(t, err)
	require.Len(t, attempts, 2)
	for _, a := range attempts {
		require.Zero(t, a.StatusCode)
		require.Contains(t, a.Error, "not a public address")
	}
}
