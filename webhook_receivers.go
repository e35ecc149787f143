package agentpay

import (
	"context"
	"errors"
	"sync"
	"time"
)

// What one process knows of each merchant's receivers, and how many of its
// webhook workers slow receivers may hold together (webhook_limits.go says
// why; docs/webhooks.md, docs/security.md#webhooks give the figures).
//
// The per-merchant cap bounds what one merchant holds, not how many
// merchants hold it: anyone can register merchants, and eleven whose
// receivers hang held 110 workers trying and as many waiting, more than
// the pool of 200. So each receiver (a merchant and mode) is, in this
// process, one of:
//
//   - new: no try of it has ended here in the last hour (nothing known):
//     one try at a time (the probe), none waiting for it. Free merchants
//     are new merchants, so however many there are, one whose receiver
//     hangs holds one worker.
//   - proven: its last try ended within WebhookSlowAfter (an answer of
//     any status, a refused connection): the merchant's cap, and as many
//     waiting, as before.
//   - slow: one of its tries was in flight WebhookSlowAfter or more, in the
//     last WebhookSlowFor: its tries need a place in the slow lane, which
//     holds Config.WebhookSlowConcurrency tries of slow receivers at once,
//     whoever they are, besides the merchant's own cap; none wait. A
//     faster answer meanwhile does not end it: a receiver cannot alternate
//     one quick answer with hanging tries to leave the lane.
//
// A try in flight (of a new or proven receiver) that reaches
// WebhookSlowAfter makes its receiver slow then, and takes a place in the
// lane; when the lane is full the try is ended there (errWebhookCut, a
// failed try, retried on the delivery's schedule). So at any moment the
// tries older than WebhookSlowAfter number at most the lane, and what slow
// receivers hold is the lane plus, for at most WebhookSlowAfter, the tries
// of receivers that were not slow yet: one per new merchant, a merchant's
// cap per proven one (once per WebhookSlowFor each). The rest of the pool
// is for the receivers that answer.
//
// Everything here is in the process's memory: no database round trip per
// try (a fast merchant's deliveries cost one map read and one timer more),
// and like the per-merchant cap it protects the process's own workers.

const (
	// DefaultWebhookSlowConcurrency is the slow lane when
	// Config.WebhookSlowConcurrency is 0: a quarter of a worker's 200
	// webhook workers.
	DefaultWebhookSlowConcurrency = 50
	// WebhookSlowAfter is how long a try may be in flight before its
	// receiver is slow: receivers answer in milliseconds to a few hundred;
	// one that takes seconds holds a worker as long.
	WebhookSlowAfter = 2 * time.Second
	// WebhookSlowFor is how long a receiver stays slow after its last try
	// that took WebhookSlowAfter or more.
	WebhookSlowFor = 10 * time.Minute
	// webhookReceiverForgotten: a receiver with no try for this long is
	// new again (its memory is dropped).
	webhookReceiverForgotten = time.Hour
)

// errWebhookCut is the attempt log's error of a try ended at
// WebhookSlowAfter because the slow lane was full.
var errWebhookCut = errors.New("no answer within 2s while this worker's places for slow receivers were all taken: the try was ended to keep workers for receivers that answer")

// receiverClass is what a process knows of a receiver.
type receiverClass int

const (
	receiverNew receiverClass = iota
	receiverProven
	receiverSlow
)

type receiverState struct {
	proven bool
	// slowUntil is when the receiver stops being slow (the service's
	// clock); zero when it never was.
	slowUntil time.Time
	// seen is its last try's start (the service's clock).
	seen time.Time
	// tryTook is how long its tries take (a moving average, the real
	// clock), and nextTurn when the last delivery turned away at its cap
	// was told to come back (busyTurn).
	tryTook  time.Duration
	nextTurn time.Time
}

// webhookReceivers is a process's knowledge of receivers and its slow lane.
type webhookReceivers struct {
	lane      int
	slowAfter time.Duration
	now       func() time.Time
	// realNow is the real clock (time.Now; tests stop it), which busyTurn
	// paces on: River runs a snoozed job by it.
	realNow func() time.Time

	mu     sync.Mutex
	states map[webhookGateKey]*receiverState
	inLane int
	swept  time.Time
}

func newWebhookReceivers(cfg Config, now func() time.Time) *webhookReceivers {
	return &webhookReceivers{lane: webhookSlowConcurrency(cfg), slowAfter: WebhookSlowAfter, now: now, realNow: time.Now,
		states: map[webhookGateKey]*receiverState{}}
}

func webhookSlowConcurrency(cfg Config) int {
	if cfg.WebhookSlowConcurrency > 0 {
		return cfg.WebhookSlowConcurrency
	}
	return DefaultWebhookSlowConcurrency
}

// classLocked is key's class at now.
func (r *webhookReceivers) classLocked(key webhookGateKey, now time.Time) receiverClass {
	st := r.states[key]
	switch {
	case st == nil:
		return receiverNew
	case now.Before(st.slowUntil):
		return receiverSlow
	case st.proven:
		return receiverProven
	}
	return receiverNew
}

// class is key's class now.
func (r *webhookReceivers) class(key webhookGateKey) receiverClass {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.classLocked(key, r.now())
}

// laneFull reports whether the slow lane has no place.
func (r *webhookReceivers) laneFull() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inLane >= r.lane
}

// admit classes key for a try about to start and, for a slow receiver,
// takes a place in the lane (inLane false: none free, the try must not
// start).
func (r *webhookReceivers) admit(key webhookGateKey) (class receiverClass, inLane bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.sweepLocked(now)
	class = r.classLocked(key, now)
	if class == receiverSlow && r.inLane < r.lane {
		r.inLane++
		inLane = true
	}
	return class, inLane
}

// leaveLane gives back a place admit took for a try that did not start.
func (r *webhookReceivers) leaveLane() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inLane--
}

// stateLocked is key's state, made when missing.
func (r *webhookReceivers) stateLocked(key webhookGateKey) *receiverState {
	st := r.states[key]
	if st == nil {
		st = &receiverState{}
		r.states[key] = st
	}
	return st
}

func (r *webhookReceivers) markSlowLocked(key webhookGateKey, now time.Time) {
	st := r.stateLocked(key)
	st.proven, st.slowUntil = false, now.Add(WebhookSlowFor)
}

// sweepLocked drops, at most once a minute, the receivers neither slow nor
// tried for webhookReceiverForgotten, so the map holds the receivers of
// the last hour only.
func (r *webhookReceivers) sweepLocked(now time.Time) {
	if now.Sub(r.swept) < time.Minute {
		return
	}
	r.swept = now
	for key, st := range r.states {
		if !now.Before(st.slowUntil) && now.Sub(st.seen) > webhookReceiverForgotten {
			delete(r.states, key)
		}
	}
}

// webhookSlot is one try let in (enterWebhookSlot): its place at its
// merchant's gate, and in the slow lane once it has one.
type webhookSlot struct {
	key     webhookGateKey
	r       *webhookReceivers
	started time.Time // the real clock: how long the receiver takes
	timer   *time.Timer
	cancel  context.CancelCauseFunc
	// inLane and ended are guarded by r.mu.
	inLane, ended bool
}

// start begins the try's watch: for a try outside the lane, a timer at
// WebhookSlowAfter (aged).
func (slot *webhookSlot) start(ctx context.Context) context.Context {
	tryCtx, cancel := context.WithCancelCause(ctx)
	slot.cancel, slot.started = cancel, time.Now()
	slot.r.mu.Lock()
	st := slot.r.stateLocked(slot.key)
	st.seen = slot.r.now()
	inLane := slot.inLane
	slot.r.mu.Unlock()
	if !inLane {
		slot.timer = time.AfterFunc(slot.r.slowAfter, slot.aged)
	}
	return tryCtx
}

// aged runs when the try has been in flight WebhookSlowAfter: its receiver
// is slow from now, and the try takes a place in the lane, or is ended
// when there is none.
func (slot *webhookSlot) aged() {
	r := slot.r
	r.mu.Lock()
	if slot.ended {
		r.mu.Unlock()
		return
	}
	r.markSlowLocked(slot.key, r.now())
	if r.inLane < r.lane {
		r.inLane++
		slot.inLane = true
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	slot.cancel(errWebhookCut)
}

// end records how the try went, once: it gives back its place in the lane,
// and makes its receiver slow (it took WebhookSlowAfter or more, or was
// cut) or proven (it ended sooner, while the receiver was not slow).
func (slot *webhookSlot) end() {
	took := time.Since(slot.started)
	if slot.timer != nil {
		slot.timer.Stop()
	}
	r := slot.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if slot.ended {
		return
	}
	slot.ended = true
	if slot.inLane {
		r.inLane--
	}
	now := r.now()
	switch {
	case took >= r.slowAfter:
		r.markSlowLocked(slot.key, now)
	case r.classLocked(slot.key, now) != receiverSlow:
		st := r.stateLocked(slot.key)
		st.proven = true
		if st.tryTook == 0 {
			st.tryTook = took
		} else {
			st.tryTook += (took - st.tryTook) / 8
		}
	}
}

// busyTurn is when a delivery of a proven receiver turned away at its cap
// should come back, from now: its turn in a queue of those already turned
// away, the receiver taking one every tryTook/cap (its cap of tries in
// flight, each taking tryTook). ok is false when the receiver is not
// proven, has no measure yet, or the turn would be past webhookBusyMax
// (WebhookBusyDelay then, as for any receiver). So a receiver that answers
// at once has its deliveries back as its places free, not after
// WebhookBusyDelay's 50 ms and more each, and one that answers slowly
// gets them back no faster than it takes them.
func (r *webhookReceivers) busyTurn(key webhookGateKey, cap int) (wait time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.states[key]
	if st == nil || r.classLocked(key, r.now()) != receiverProven || st.tryTook <= 0 || cap <= 0 {
		return 0, false
	}
	now := r.realNow()
	turn := now
	if st.nextTurn.After(now) {
		turn = st.nextTurn
	}
	turn = turn.Add(st.tryTook / time.Duration(cap))
	if turn.Sub(now) > webhookBusyMax {
		return 0, false
	}
	st.nextTurn = turn
	return turn.Sub(now), true
}
