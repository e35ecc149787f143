package store

import "sync"

// GroupBatch coalesces concurrent calls into shared batches (group-commit
// style), for the statements that many requests run at once (status reads,
// webhook tries). A call starts a batch at once when none is running;
// otherwise it waits, and the next batch to start takes every waiting call
// (up to max). One batch runs at a time, so every call that arrives during
// one joins the next: every call is served by a batch that starts after it
// arrived.
type GroupBatch[C any] struct {
	max int
	// do serves a batch: it answers every call in it.
	do func(batch []C)

	mu       sync.Mutex
	waiting  []C
	inFlight bool
	// submitted counts the calls queued so far, batches the batches
	// started (tests).
	submitted, batches int64
}

// NewGroupBatch returns a batcher whose batches hold up to max calls, each
// served by do, which must answer every call of its batch.
func NewGroupBatch[C any](max int, do func(batch []C)) *GroupBatch[C] {
	return &GroupBatch[C]{max: max, do: do}
}

// Submit queues c and, when no batch is running, runs one in this
// goroutine. The caller waits for c's own answer.
func (g *GroupBatch[C]) Submit(c C) {
	g.mu.Lock()
	g.waiting = append(g.waiting, c)
	g.submitted++
	var batch []C
	if !g.inFlight {
		g.inFlight = true
		batch = g.takeLocked()
	}
	g.mu.Unlock()
	if batch != nil {
		g.run(batch)
	}
}

// Counts reports how many calls have been queued and how many batches
// started.
func (g *GroupBatch[C]) Counts() (calls, batches int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.submitted, g.batches
}

// takeLocked removes up to max waiting calls, the next batch (g.mu held).
func (g *GroupBatch[C]) takeLocked() []C {
	g.batches++
	n := min(len(g.waiting), g.max)
	batch := make([]C, n)
	copy(batch, g.waiting)
	rest := copy(g.waiting, g.waiting[n:])
	clear(g.waiting[rest:])
	g.waiting = g.waiting[:rest]
	return batch
}

// run serves a batch, then hands the calls that arrived meanwhile to the
// next batch (in another goroutine: this one belongs to a call that has its
// answer), or gives the slot up.
func (g *GroupBatch[C]) run(batch []C) {
	g.do(batch)
	g.mu.Lock()
	if len(g.waiting) == 0 {
		g.inFlight = false
		g.mu.Unlock()
		return
	}
	next := g.takeLocked()
	g.mu.Unlock()
	go g.run(next)
}
