package agentpay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// hangingServer is a loopback receiver that answers nothing until its
// sender gives up or the test ends.
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handlers
	return srv
}

// TestWebhookReceiverClasses: what a process lets each receiver have at
// once. A new one one try, none waiting; once a try ended within
// WebhookSlowAfter it is proven and has the merchant's cap; a try in flight
// WebhookSlowAfter makes it slow, and a slow one's tries need a place in
// the slow lane, none waiting, for WebhookSlowFor of the service's clock,
// a quick answer meanwhile changing nothing; then it is new again.
func TestWebhookReceiverClasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewStub(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{Clock: clk, WebhookMerchantConcurrency: 3, WebhookSlowConcurrency: 2})
	svc.webhookReceivers.slowAfter = 100 * time.Millisecond
	a, b := uuid.New(), uuid.New()
	enter := func(m uuid.UUID) *webhookSlot {
		t.Helper()
		slot, _, ok := svc.enterWebhookSlot(ctx, m, false)
		if !ok {
			return nil
		}
		return slot
	}
	class := func(m uuid.UUID) receiverClass {
		return svc.webhookReceivers.class(webhookGateKey{merchantID: m})
	}

	// New: one try.
	first := enter(a)
	require.NotNil(t, first)
	require.True(t, svc.WebhookSlotsFull(a, false))
	require.Nil(t, enter(a), "a new receiver's second try waits for the first to end")
	require.False(t, svc.WebhookSlotsFull(a, true), "each mode is a receiver of its own")
	svc.leaveWebhookSlot(first)
	require.Equal(t, receiverProven, class(a), "it answered within WebhookSlowAfter")

	// Proven: the cap.
	var held []*webhookSlot
	var tries []context.Context
	for range 3 {
		slot, tryCtx, ok := svc.enterWebhookSlot(ctx, a, false)
		require.True(t, ok)
		held, tries = append(held, slot), append(tries, tryCtx)
	}
	require.False(t, svc.WebhookSlotsFull(a, false), "at its cap, as many may still wait")

	// Its tries reach WebhookSlowAfter: slow, the first two take the lane's
	// places, the third is ended.
	require.Eventually(t, func() bool { return class(a) == receiverSlow }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return svc.webhookReceivers.laneFull() }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		cut := 0
		for _, c := range tries {
			if errors.Is(context.Cause(c), errWebhookCut) {
				cut++
			}
		}
		return cut == 1
	}, 10*time.Second, time.Millisecond, "the try that found no place is ended")
	for _, slot := range held {
		svc.leaveWebhookSlot(slot)
	}
	require.Zero(t, svc.webhookReceivers.inLane, "every try gave its place back")

	// Slow: lane places, none waiting; a quick answer changes nothing.
	s1, s2 := enter(a), enter(a)
	require.NotNil(t, s1)
	require.NotNil(t, s2)
	require.True(t, svc.WebhookSlotsFull(a, false), "the lane is full")
	require.Nil(t, enter(a))
	bs := enter(b)
	require.NotNil(t, bs, "another, new, receiver needs no lane place")
	svc.leaveWebhookSlot(bs)
	svc.leaveWebhookSlot(s1)
	svc.leaveWebhookSlot(s2)
	require.Equal(t, receiverSlow, class(a), "answers within WebhookSlowAfter do not end it")

	clk.Advance(WebhookSlowFor)
	require.Equal(t, receiverNew, class(a), "WebhookSlowFor after its last slow try")
}

// TestWebhookSlowTryCutWhenTheLaneIsFull: a try in flight
// WebhookSlowAfter with no place left in the slow lane is ended there: a
// failed try with its own error, no status, retried on the delivery's
// schedule; its receiver is slow.
func TestWebhookSlowTryCutWhenTheLaneIsFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{WebhookSlowConcurrency: 1})
	svc.webhookReceivers.slowAfter = 200 * time.Millisecond
	// The lane's one place is taken by another slow receiver's try.
	other := uuid.New()
	key := webhookGateKey{merchantID: other}
	svc.webhookReceivers.mu.Lock()
	svc.webhookReceivers.markSlowLocked(key, svc.now())
	svc.webhookReceivers.mu.Unlock()
	taken, _, ok := svc.enterWebhookSlot(ctx, other, false)
	require.True(t, ok)
	t.Cleanup(func() { svc.leaveWebhookSlot(taken) })

	m, _ := createWebhookMerchant(t, svc, hangingServer(t).URL)
	d := onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID)
	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.ErrorIs(t, res.Err, errWebhookCut, "cut at slowAfter, not ended by the try's timeout")
	require.False(t, res.Done)
	require.False(t, res.RetryAt.IsZero(), "retried on the delivery's schedule")
	a := svc.cfg.DB.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(d.ID)).OnlyX(ctx)
	require.Zero(t, a.StatusCode)
	require.Equal(t, errWebhookCut.Error(), a.Error)
	require.Equal(t, webhookdelivery.StatusPending, onlyDelivery(t, svc, d.EventID).Status)
	require.Equal(t, receiverSlow, svc.webhookReceivers.class(webhookGateKey{merchantID: m.ID}))
}

// TestWebhookBusyTurns: a delivery of a proven receiver turned away at its
// merchant's cap comes back at its turn in the queue of those turned away
// before it, one every tryTook/cap (the rate at which the receiver takes
// them); a new or slow receiver, one not yet measured, or a turn further
// than webhookBusyMax falls back to WebhookBusyDelay. How long tries take is
// a moving average of the tries that ended in time.
func TestWebhookBusyTurns(t *testing.T) {
	t.Parallel()
	clk := clock.NewStub(time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC))
	r := newWebhookReceivers(Config{}, clk.Now)
	real := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	r.realNow = func() time.Time { return real }
	proven, fresh, slow, unmeasured := webhookGateKey{merchantID: uuid.New()}, webhookGateKey{merchantID: uuid.New()},
		webhookGateKey{merchantID: uuid.New()}, webhookGateKey{merchantID: uuid.New()}
	r.states[proven] = &receiverState{proven: true, tryTook: 10 * time.Millisecond}
	r.states[slow] = &receiverState{slowUntil: clk.Now().Add(time.Minute), tryTook: 10 * time.Millisecond}
	r.states[unmeasured] = &receiverState{proven: true}

	for i, want := range []time.Duration{2, 4, 6} {
		got, ok := r.busyTurn(proven, 5)
		require.True(t, ok, "turn %d", i)
		require.Equal(t, want*time.Millisecond, got, "turn %d: one every 10ms/5", i)
	}
	real = real.Add(5 * time.Millisecond)
	got, ok := r.busyTurn(proven, 5)
	require.True(t, ok)
	require.Equal(t, 3*time.Millisecond, got, "behind the turns given 5ms ago (at 2, 4 and 6ms)")
	real = real.Add(time.Second)
	got, _ = r.busyTurn(proven, 5)
	require.Equal(t, 2*time.Millisecond, got, "the queue emptied meanwhile")

	for name, key := range map[string]webhookGateKey{"new": fresh, "slow": slow, "unmeasured": unmeasured} {
		_, ok := r.busyTurn(key, 5)
		require.False(t, ok, name)
	}
	r.states[proven].tryTook = 3 * time.Second
	_, ok = r.busyTurn(proven, 5)
	require.True(t, ok, "600ms")
	for ok {
		_, ok = r.busyTurn(proven, 5)
	}
	require.LessOrEqual(t, r.states[proven].nextTurn.Sub(real), webhookBusyMax, "no turn past webhookBusyMax is given")

	// The measure: the first try's time, then an eighth of each next
	// difference; a try of WebhookSlowAfter or more makes it slow instead.
	measured := webhookGateKey{merchantID: uuid.New()}
	end := func(took time.Duration) {
		slot := &webhookSlot{key: measured, r: r, started: time.Now().Add(-took)}
		slot.end()
	}
	end(80 * time.Millisecond)
	require.InDelta(t, float64(80*time.Millisecond), float64(r.states[measured].tryTook), float64(5*time.Millisecond))
	end(0)
	require.InDelta(t, float64(70*time.Millisecond), float64(r.states[measured].tryTook), float64(5*time.Millisecond))
	end(WebhookSlowAfter)
	_, ok = r.busyTurn(measured, 5)
	require.False(t, ok, "slow now")
}
