// Package clock is the time the rules read. A service is given one Clock
// (agentpay.Config.Clock) and hands it to the machinery whose decisions
// depend on the time (internal/ratelimit's windows), as River's archetype
// carries its time generator: a test moves the one clock (a session past
// its expiry, a signed message past its TTL, a rate window turning over)
// instead of waiting or writing rows dated in the past.
//
// How long a cache trusts what it read is such a decision too: the
// authentication cache (internal/authcache) and the chain heads
// (internal/headcache) age their entries by this clock. What measures how
// long something took (a webhook try's duration, an I/O timeout) or waits
// (a timer) reads the real time: a stubbed clock has no monotonic reading,
// and a timer cannot wait on it.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the real clock, the default everywhere.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Func is a function as a Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// Stub is a clock a test sets and moves; it stands still in between. It is
// safe for concurrent use.
type Stub struct {
	mu sync.Mutex
	t  time.Time
}

// NewStub returns a clock reading t.
func NewStub(t time.Time) *Stub {
	return &Stub{t: t}
}

// Now returns the time the clock was last set to.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

// Set moves the clock to t.
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = t
}

// Advance moves the clock d forward (backward when d is negative).
func (s *Stub) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = s.t.Add(d)
}
