package worker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
)

// crashReceiver is a loopback receiver that counts each request by its
// webhook-id, and while holding, holds every request until its sender goes
// away (as a worker killed mid-try does).
type crashReceiver struct {
	mu       sync.Mutex
	hold     chan struct{} // nil: answer 200 at once
	inFlight int
	seen     map[string]int // webhook-id -> requests received
	answered map[string]int // webhook-id -> 200s sent
}

func (c *crashReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("webhook-id")
	c.mu.Lock()
	c.seen[id]++
	hold := c.hold
	c.inFlight++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	c.mu.Lock()
	c.answered[id]++
	c.mu.Unlock()
}

// TestWebhookBatchCrash: a worker stopped in the middle of a claimed batch
// (its receiver holding the batch's tries, more of the merchant's
// deliveries claimed behind them) leaves them held by the batch's lease;
// a worker started afresh (a new process: new service, new River client)
// delivers every one once the lease has ended: each event's webhook-id
// answered at least once at the receiver, no delivery left pending, and
// no try recorded twice for one post (a delivery's attempts never
// outnumber the requests its webhook-id made).
func TestWebhookBatchCrash(t *testing.T) {
	t.Parallel()
	delays := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	h := newWebhookHarness(t, delays)
	rcv := &crashReceiver{seen: map[string]int{}, answered: map[string]int{}}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	m, _ := h.merchant(t, srv.URL)
	ctx := context.Background()
	succeeded := func() int {
		n, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusSucceeded)).Count(ctx)
		require.NoError(t, err)
		return n
	}

	// The first worker proves the receiver (its first try is alone), then
	// claims batches of the merchant's deliveries.
	stop := h.startWorker(t, Config{ScanInterval: time.Hour})
	events := h.record(t, m, 1)
	require.Eventually(t, func() bool { return succeeded() == 1 }, 30*time.Second, 10*time.Millisecond)
	hold := make(chan struct{})
	rcv.mu.Lock()
	rcv.hold = hold
	rcv.mu.Unlock()
	events = append(events, h.record(t, m, 300)...)
	require.Eventually(t, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.inFlight >= agentpay.DefaultWebhookMerchantConcurrency
	}, 30*time.Second, 5*time.Millisecond, "a batch's tries in flight")

	// Killed mid-batch: its tries end unanswered, unrecorded; what it
	// claimed stays claimed.
	stop()
	held, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusPending),
		webhookdelivery.NextAttemptAtGT(time.Now().Add(10*time.Second))).Count(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, held, agentpay.DefaultWebhookMerchantConcurrency, "the batch's deliveries are held by its lease")
	close(hold)
	rcv.mu.Lock()
	rcv.hold = nil
	rcv.mu.Unlock()

	// A new process: what was held is delivered once its lease ends.
	restarted := newHarness(t, h.env, agentpay.Config{WebhookRetryDelays: delays})
	restarted.startWorker(t, Config{ScanInterval: time.Hour})
	require.Eventually(t, func() bool { return succeeded() == len(events) }, 90*time.Second, 50*time.Millisecond)

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, ev := range events {
		id := ev.ID.String()
		require.GreaterOrEqual(t, rcv.answered[id], 1, "event %s answered", id)
		ds := h.deliveries(t, ev.ID)
		require.Len(t, ds, 1)
		tries, err := h.db.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(ds[0].ID)).Count(ctx)
		require.NoError(t, err)
		require.Equal(t, ds[0].Attempts, tries, "event %s", id)
		require.LessOrEqual(t, tries, rcv.seen[id], "event %s: a try recorded without its post, or twice", id)
	}
	pending, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusPending)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
}

// TestWebhookBatchGivesBackOnStop: a worker stopped in the middle of a
// batch (its receiver holding the batch's tries, more of the merchant's
// deliveries claimed behind them) gives back every claimed delivery it had
// not posted: due at once, not at its lease's end; only the tries the stop
// cut mid-post (which may have reached the receiver) keep their lease. A
// new worker then delivers the given-back ones while those tries are still
// held.
func TestWebhookBatchGivesBackOnStop(t *testing.T) {
	t.Parallel()
	h := newWebhookHarness(t, nil)
	rcv := &crashReceiver{seen: map[string]int{}, answered: map[string]int{}}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	m, _ := h.merchant(t, srv.URL)
	ctx := context.Background()

	stop := h.startWorker(t, Config{ScanInterval: time.Hour})
	h.record(t, m, 1)
	require.Eventually(t, func() bool {
		n, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusSucceeded)).Count(ctx)
		require.NoError(t, err)
		return n == 1
	}, 30*time.Second, 10*time.Millisecond, "the receiver is proven")
	hold := make(chan struct{})
	rcv.mu.Lock()
	rcv.hold = hold
	rcv.mu.Unlock()
	h.record(t, m, 300)
	require.Eventually(t, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.inFlight >= agentpay.DefaultWebhookMerchantConcurrency
	}, 30*time.Second, 5*time.Millisecond, "a batch's tries in flight")
	stop()
	close(hold)

	stopped := time.Now()
	pending, err := h.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.StatusEQ(webhookdelivery.StatusPending)).
		WithEvent().All(ctx)
	require.NoError(t, err)
	rcv.mu.Lock()
	var posted, notPosted []*ent.WebhookDelivery
	for _, d := range pending {
		if rcv.seen[d.Edges.Event.ID.String()] > 0 {
			posted = append(posted, d)
		} else {
			notPosted = append(notPosted, d)
		}
	}
	rcv.mu.Unlock()
	require.Len(t, pending, 300)
	require.NotEmpty(t, posted, "tries cut mid-post")
	for _, d := range posted {
		require.True(t, d.NextAttemptAt.After(stopped), "a try cut mid-post keeps its lease")
	}
	for _, d := range notPosted {
		require.False(t, d.NextAttemptAt.After(stopped), "delivery %s, never posted, is due at once (its lease was %s)", d.ID, d.NextAttemptAt)
	}

	// A new process takes them at once: every one is delivered while the
	// cut tries' leases still hold them.
	restarted := newHarness(t, h.env, agentpay.Config{})
	restarted.startWorker(t, Config{ScanInterval: time.Hour})
	require.Eventually(t, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, d := range notPosted {
			if rcv.answered[d.Edges.Event.ID.String()] == 0 {
				return false
			}
		}
		return true
	}, 25*time.Second, 20*time.Millisecond, "the given-back deliveries are delivered")
	for _, d := range posted {
		cur, err := h.db.Ent.WebhookDelivery.Get(ctx, d.ID)
		require.NoError(t, err)
		require.Equal(t, webhookdelivery.StatusPending, cur.Status, "a cut try waits for its lease's end")
	}
}
