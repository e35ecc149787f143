package ratelimit

import (
	"log/slog"
	"sync"

	"agentpay/internal/clock"
)

// NewLocal returns a limiter that counts in this process's memory whatever
// the database, for limits on what one process serves (its readiness
// probes): other instances have their own and need not agree.
func NewLocal(logger *slog.Logger, clk clock.Clock) *Limiter {
	return &Limiter{clock: clk, counters: newMemCounters(), logger: logger}
}

// Slots counts what each key holds at once in this process (a client's
// open connections), up to a limit.
type Slots[K comparable] struct {
	limit int
	mu    sync.Mutex
	held  map[K]int
}

// NewSlots allows each key limit slots at once.
func NewSlots[K comparable](limit int) *Slots[K] {
	return &Slots[K]{limit: limit, held: map[K]int{}}
}

// Acquire takes one of key's slots; release gives it back (once, however
// often it is called). ok is false, and nothing taken, when key holds all
// of its slots.
func (s *Slots[K]) Acquire(key K) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[key] >= s.limit {
		return func() {}, false
	}
	s.held[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[key]--; s.held[key] <= 0 {
				delete(s.held, key)
			}
		})
	}, true
}
