package gate

import (
	"context"
	"sync"
	"time"
)

// Gates are the gates of every key in one process.
type Gates[K comparable] struct {
	limit, maxWaiting int

	mu    sync.Mutex
	gates map[K]*gate
}

// gate is one key's: its holders, its waiters, and how a leaving holder
// wakes one waiter. A gate with neither is deleted.
type gate struct {
	holders, waiting int
	// left holds a token per holder that left while callers waited; a
	// waiter takes one, then tries again (another caller may have taken the
	// place first).
	left chan struct{}
}

// New returns gates of at most limit holders and maxWaiting waiters per key.
func New[K comparable](limit, maxWaiting int) *Gates[K] {
	return &Gates[K]{limit: max(limit, 1), maxWaiting: max(maxWaiting, 0), gates: map[K]*gate{}}
}

// Enter makes the caller a holder of key. When key has its limit of
// holders, the caller waits up to wait for one to leave, if fewer than
// maxWaiting callers already wait; else, or when the wait or ctx ends
// first, it returns false. A true Enter is followed by one Leave.
func (g *Gates[K]) Enter(ctx context.Context, key K, wait time.Duration) bool {
	return g.EnterUnder(ctx, key, g.limit, wait)
}

// EnterUnder is Enter with limit holders in place of the gates' own, for
// a key the caller holds to less (or, waiting 0, to more) for now.
func (g *Gates[K]) EnterUnder(ctx context.Context, key K, limit int, wait time.Duration) bool {
	limit = max(limit, 1)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		gt := g.gates[key]
		if gt == nil {
			gt = &gate{left: make(chan struct{}, g.maxWaiting+1)}
			g.gates[key] = gt
		}
		if gt.holders < limit {
			gt.holders++
			g.mu.Unlock()
			return true
		}
		if gt.waiting >= g.maxWaiting || wait <= 0 {
			g.mu.Unlock()
			return false
		}
		gt.waiting++
		g.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		woken := false
		select {
		case <-gt.left:
			woken = true
		case <-timer.C:
		case <-ctx.Done():
		}
		g.mu.Lock()
		gt.waiting--
		g.dropLocked(key, gt)
		g.mu.Unlock()
		if !woken {
			return false
		}
	}
}

// Leave gives up a place Enter gave, waking a waiter if there is one.
func (g *Gates[K]) Leave(key K) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := g.gates[key]
	if gt == nil || gt.holders == 0 {
		panic("gate: Leave without Enter")
	}
	gt.holders--
	if gt.waiting > 0 {
		select {
		case gt.left <- struct{}{}:
		default: // as many tokens as waiters already
		}
	}
	g.dropLocked(key, gt)
}

// Full reports whether a caller of key would be turned away now: key has
// its limit of holders and its most waiters. Another caller may change that
// at once; it is a hint.
func (g *Gates[K]) Full(key K) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := g.gates[key]
	return gt != nil && gt.holders >= g.limit && gt.waiting >= g.maxWaiting
}

// Holders is how many holders key has now.
func (g *Gates[K]) Holders(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt := g.gates[key]; gt != nil {
		return gt.holders
	}
	return 0
}

// dropLocked deletes gt when nobody holds or waits at it.
func (g *Gates[K]) dropLocked(key K, gt *gate) {
	if gt.holders == 0 && gt.waiting == 0 && g.gates[key] == gt {
		delete(g.gates, key)
	}
}
