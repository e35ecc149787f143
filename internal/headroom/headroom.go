// Package headroom lets one process spend part of a counted cap without
// counting it again on every use.
//
// A cap such as "at most N open sessions per merchant" is enforced by
// counting what is held and refusing at N. Counting under a lock on every
// use is exact but makes a busy owner's uses one commit at a time; counting
// without a lock on every use costs a read of up to N rows each time. This
// cache sits in front of the exact count: after a count found headroom,
// the process may grant up to half of it without counting again, for at
// most a TTL, and only while it is at least Min. Near the cap every use is
// counted, by the caller, under its lock.
//
// The grants a process has handed out and not yet finished (Take, then
// Done) are in flight: their rows may not be visible to a count yet. So a
// count adds them (Count), and the new grant is computed in the same step,
// under the cache's lock, from that conservative total. Hence one process
// never passes the cap: what it holds, plus its grants in flight, plus the
// grants still to take, never exceeds it. K processes granting from counts
// taken in the same TTL can pass it by at most (K-1) halves of the
// headroom. What the cap bounds must tolerate that: it is meant for costs,
// not money.
//
// Ages are measured on the real (monotonic) clock, as internal/clock says of
// every cache.
package headroom

import (
	"sync"
	"time"
)

// Config sets a Cache.
type Config struct {
	// TTL is how long a count may be spent from (default 1 s).
	TTL time.Duration
	// Min is the smallest headroom spent from without counting (default
	// 64): below it, every use is counted.
	Min int
	// Size is how many idle keys are remembered (default 10,000); past it
	// the idle keys whose grant expired are forgotten, which only costs a
	// count. A key with grants in flight is never forgotten.
	Size int
}

// Cache remembers, per key, how many uses may still be granted without a
// count, and how many granted uses are still in flight.
type Cache[K comparable] struct {
	ttl  time.Duration
	min  int
	size int
	now  func() time.Time

	mu      sync.Mutex
	entries map[K]*entry
}

type entry struct {
	left     int       // uses still granted without a count
	inFlight int       // granted uses not yet Done
	at       time.Time // when the count was taken
}

// New is an empty Cache.
func New[K comparable](cfg Config) *Cache[K] {
	if cfg.TTL <= 0 {
		cfg.TTL = time.Second
	}
	if cfg.Min <= 0 {
		cfg.Min = 64
	}
	if cfg.Size <= 0 {
		cfg.Size = 10_000
	}
	return &Cache[K]{ttl: cfg.TTL, min: cfg.Min, size: cfg.Size, now: time.Now, entries: map[K]*entry{}}
}

// Take grants one use of key without a count, when a count taken within
// the TTL left enough headroom; the caller calls Done once the use is
// written or failed. false means the caller counts, exactly and under its
// lock, and asks Count.
func (c *Cache[K]) Take(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil || e.left <= 0 || c.now().Sub(e.at) >= c.ttl {
		return false
	}
	e.left--
	e.inFlight++
	return true
}

// Done ends a use Take granted.
func (c *Cache[K]) Done(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil && e.inFlight > 0 {
		e.inFlight--
	}
}

// Count decides a counted use: held is what the caller's count found
// (under its lock), to which the grants in flight are added, since their
// rows may not be visible to it. It reports whether one more use fits under
// limit and, when it does, grants half of the headroom left after it
// (nothing below Min) for the TTL.
func (c *Cache[K]) Count(key K, held, limit int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		c.forgetIdle()
		e = &entry{}
		c.entries[key] = e
	}
	free := limit - held - e.inFlight
	e.at, e.left = c.now(), 0
	if free <= 0 {
		return false
	}
	if free-1 >= c.min {
		e.left = (free - 1) / 2
	}
	return true
}

// forgetIdle drops, once the cache is full, the keys with nothing in
// flight whose grant has expired.
func (c *Cache[K]) forgetIdle() {
	if len(c.entries) < c.size {
		return
	}
	now := c.now()
	for k, e := range c.entries {
		if e.inFlight == 0 && now.Sub(e.at) >= c.ttl {
			delete(c.entries, k)
		}
	}
}
