// Package headroom lets one process spend part of a counted cap without
// counting it again on every use.
//
// A cap such as "at most N open sessions per merchant" is enforced by
// counting what is held and refusing at N. Counting under a lock on every
// use is exact but makes a busy owner's uses one commit at a time; counting
// without a lock on every use costs a read of up to N rows each time. This
// cache sits in front of the exact count: after a count found headroom h
// (N minus what is held), the process may grant up to h/2 uses without
// counting again, for at most a TTL, and only while h is at least Min. Near
// the cap (h below Min) every use is counted, exactly, by the caller.
//
// So one process never passes the cap (its grants since the count are at
// most h/2 < h), and K processes granting from counts taken in the same TTL
// pass it by at most (K-2)·h/2. What the cap bounds must tolerate that:
// it is meant for costs, not money.
//
// Ages are measured on the real (monotonic) clock, as internal/clock says of
// every cache.
package headroom

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Config sets a Cache.
type Config struct {
	// TTL is how long a count may be spent from (default 1 s).
	TTL time.Duration
	// Min is the smallest headroom spent from without counting (default
	// 64): below it, every use is counted.
	Min int
	// Size is how many keys are remembered (default 10,000; the least
	// recently used is forgotten, which only costs a count).
	Size int
}

// Cache remembers, per key, how many uses may still be granted without a
// count.
type Cache[K comparable] struct {
	ttl time.Duration
	min int
	now func() time.Time

	mu      sync.Mutex
	entries *lru.Cache[K, grant]
}

type grant struct {
	left int       // uses still granted without a count
	at   time.Time // when the count was taken
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
	entries, err := lru.New[K, grant](cfg.Size)
	if err != nil {
		panic(err) // only for a size below 1, excluded above
	}
	return &Cache[K]{ttl: cfg.TTL, min: cfg.Min, now: time.Now, entries: entries}
}

// Take grants one use of key without a count, when a count taken within
// the TTL left enough headroom. false means the caller counts (exactly) and
// then reports the headroom it found with Counted.
func (c *Cache[K]) Take(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.entries.Get(key)
	if !ok || g.left <= 0 || c.now().Sub(g.at) >= c.ttl {
		return false
	}
	g.left--
	c.entries.Add(key, g)
	return true
}

// Counted records that a count of key found headroom free uses (the cap
// minus what is held, before the caller's own use).
func (c *Cache[K]) Counted(key K, free int) {
	left := 0
	if free >= c.min {
		left = free / 2
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Add(key, grant{left: left, at: c.now()})
}
