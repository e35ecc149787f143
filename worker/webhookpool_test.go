package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/testenv"
)

// hangingReceivers are loopback receivers that never answer: each request
// is held until its sender gives up (the try's timeout) or the test ends.
type hangingReceivers struct {
	mu            sync.Mutex
	inFlight, max int
	requests      int
	release       chan struct{}
	once          sync.Once
}

func newHangingReceivers(t *testing.T) *hangingReceivers {
	h := &hangingReceivers{release: make(chan struct{})}
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	return h
}

// server starts one receiver; it stops when the test ends.
func (h *hangingReceivers) server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.requests++
		h.inFlight++
		h.max = max(h.max, h.inFlight)
		h.mu.Unlock()
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) }) // before Close, which waits for the handlers
	return srv
}

func (h *hangingReceivers) counts() (inFlight, most, requests int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight, h.max, h.requests
}

// TestElevenHangingMerchantsDoNotHoldThePool: eleven merchants (anyone can
// register one) whose receivers never answer, each with more deliveries
// than twice its share of the pool, and a worker with the production
// figures (200 webhook workers, 10 tries in flight per merchant, 50 for
// slow receivers): a twelfth merchant, whose receiver answers at once,
// gets each of its events within 2 s of recording it, from the moment the
// eleven hang; together the eleven never hold more than the slow lane.
// Eleven merchants' shares (10 trying and 10 waiting each, 220) exceed the
// pool: before the lane, the twelfth's events came 2 to 3 s late.
func TestElevenHangingMerchantsDoNotHoldThePool(t *testing.T) {
	const (
		hanging = 11
		backlog = 40 // per hanging merchant: twice its share, and more
		events  = 15
		onTime  = 2 * time.Second
	)
	h := newWebhookHarnessWith(t, testenv.Options{}, agentpay.Config{})
	receivers := newHangingReceivers(t)
	var slow []*ent.Merchant
	for range hanging {
		m, _ := h.merchant(t, receivers.server(t).URL+"/hooks")
		slow = append(slow, m)
	}
	fast := testenv.NewReceiver(t, http.StatusOK)
	twelfth, _ := h.merchant(t, fast.URL+"/hooks")
	h.recordFor(t, slow, hanging*backlog)

	h.startWorker(t, Config{ScanInterval: time.Hour, HeadPollInterval: -1})
	require.Eventually(t, func() bool { n, _, _ := receivers.counts(); return n >= hanging }, 20*time.Second, 10*time.Millisecond,
		"every hanging receiver holds tries")

	// The twelfth's events, one every 200 ms, while the eleven hang.
	recorded := map[string]time.Time{}
	for range events {
		at := time.Now()
		ev := h.record(t, twelfth, 1)[0]
		recorded[ev.ID.String()] = at
		time.Sleep(200 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return len(fast.Requests()) >= events }, 30*time.Second, 10*time.Millisecond,
		"the twelfth's events are delivered")
	var late []time.Duration
	var slowest time.Duration
	for _, r := range fast.Requests() {
		took := r.At.Sub(recorded[r.EventID])
		slowest = max(slowest, took)
		if took > onTime {
			late = append(late, took)
		}
	}
	inFlight, most, requests := receivers.counts()
	t.Logf("twelfth: slowest delivery %s after its event; hanging receivers: %d tries in flight, at most %d at once, %d requests",
		slowest.Round(time.Millisecond), inFlight, most, requests)
	require.Empty(t, late, "deliveries of the twelfth later than %s after their event", onTime)
	require.LessOrEqual(t, most, h.svc.WebhookSlowConcurrency(), "the hanging receivers together held at most the slow lane")
}
