// Package headcache keeps the latest head (block number or slot) of each
// chain for one process, so that whatever shows heads (the GraphQL chains
// query and chainHead subscriptions, /readyz) costs the chains' nodes a
// bounded number of calls however many clients ask.
//
// Two things feed it: the process's own deposit scans put the head each
// poll read (Put), at no extra call; and a read of an entry older than the
// TTL refreshes it on demand (Get), one refresh per key at a time (single
// flight: concurrent readers wait for the one call and share its answer).
// So a key costs at most one node call per TTL, whatever the number of
// readers, and none at all in a process whose scans keep it fresh. A failed
// refresh is kept for the TTL too: a node that is down is not asked again
// by every reader.
//
// Ages are measured on the service's clock (Config.Clock, internal/clock):
// how long a head is trusted is a decision like any other the time takes,
// and a test ages an entry by moving that clock instead of sleeping.
package headcache

import (
	"context"
	"sync"
	"time"

	"agentpay/internal/clock"
)

// Head is a key's head as last learnt.
type Head struct {
	Number uint64
	// Err is why the last refresh failed; Number is then 0.
	Err error
	// At is when it was learnt.
	At time.Time
}

// Cache holds the heads of keys K.
type Cache[K comparable] struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[K]*entry
}

type entry struct {
	head Head
	have bool
	// refreshing is closed when the refresh in flight ends; nil when none
	// is.
	refreshing chan struct{}
}

// New returns a cache whose entries are fresh for ttl by clk.
func New[K comparable](ttl time.Duration, clk clock.Clock) *Cache[K] {
	return newCache[K](ttl, clk.Now)
}

func newCache[K comparable](ttl time.Duration, now func() time.Time) *Cache[K] {
	return &Cache[K]{ttl: ttl, now: now, entries: map[K]*entry{}}
}

// Put records a head learnt elsewhere (a scan's poll).
func (c *Cache[K]) Put(key K, number uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(key)
	e.head, e.have = Head{Number: number, At: c.now()}, true
}

// Get returns key's head, calling fetch when the entry is older than the
// TTL and no other refresh of it is in flight (else waiting for that one).
// fetch runs detached from ctx, so a reader that gives up does not fail the
// refresh the others wait for; it must bound itself (the chain adapters'
// RPC deadline does). A reader whose ctx ends first gets the entry as it
// stands: stale, or ctx's error when there is none.
func (c *Cache[K]) Get(ctx context.Context, key K, fetch func(context.Context) (uint64, error)) Head {
	c.mu.Lock()
	e := c.entry(key)
	if e.have && c.now().Sub(e.head.At) < c.ttl {
		h := e.head
		c.mu.Unlock()
		return h
	}
	done := e.refreshing
	if done == nil {
		done = make(chan struct{})
		e.refreshing = done
		go c.refresh(context.WithoutCancel(ctx), key, e, fetch)
	}
	c.mu.Unlock()

	select {
	case <-done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !e.have {
		return Head{Err: ctx.Err(), At: c.now()}
	}
	return e.head
}

func (c *Cache[K]) refresh(ctx context.Context, key K, e *entry, fetch func(context.Context) (uint64, error)) {
	n, err := fetch(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.head, e.have = Head{Number: n, Err: err, At: c.now()}, true
	close(e.refreshing)
	e.refreshing = nil
}

func (c *Cache[K]) entry(key K) *entry {
	e := c.entries[key]
	if e == nil {
		e = &entry{}
		c.entries[key] = e
	}
	return e
}
