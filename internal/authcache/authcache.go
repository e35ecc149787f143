package authcache

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"

	"agentpay/ent"
	"agentpay/internal/clock"
	"agentpay/internal/store"
)

// maxEntries bounds a cache; past it, expired entries are swept and, if it
// is still full, everything is forgotten.
const maxEntries = 1 << 16

// Cache holds values of type V by key, each owned by the owner (an agent, a
// merchant) whose changes drop it.
type Cache[V any] struct {
	ttl   time.Duration
	clock clock.Clock
	owner func(V) uuid.UUID
	clone func(V) V
	// reads shares a key's read among the requests waiting for it.
	reads singleflight.Group

	mu      sync.Mutex
	epoch   uint64              // counts the changes seen
	allAt   uint64              // epoch of the last change to owners not known one by one
	entries map[string]entry[V] // key -> value
	changed map[uuid.UUID]change
	swept   time.Time
}

type entry[V any] struct {
	value V
	owner uuid.UUID
	epoch uint64    // the epoch when the read began
	read  time.Time // when the read began
}

// change is an owner's last change.
type change struct {
	epoch uint64
	at    time.Time
}

// New returns a cache trusting entries for ttl (ttl <= 0 caches nothing)
// by clk, the service's clock (so a test ages entries by moving it); owner
// names a value's owner, clone copies a value so that callers may change
// what they get.
func New[V any](ttl time.Duration, clk clock.Clock, owner func(V) uuid.UUID, clone func(V) V) *Cache[V] {
	return &Cache[V]{ttl: ttl, clock: clk, owner: owner, clone: clone,
		entries: make(map[string]entry[V]), changed: make(map[uuid.UUID]change)}
}

// Read is a read of the database begun for the cache.
type Read struct {
	epoch uint64
	at    time.Time
}

// Begin marks the start of a read whose result may be stored with Put.
func (c *Cache[V]) Begin() Read {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Read{epoch: c.epoch, at: c.clock.Now()}
}

// Get returns a copy of the value last read with key, if still trusted.
func (c *Cache[V]) Get(key string) (V, bool) {
	var zero V
	if c.ttl <= 0 {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.clock.Now().Sub(e.read) >= c.ttl || !c.unchangedSince(e.owner, e.epoch) {
		return zero, false
	}
	return c.clone(e.value), true
}

// Put stores (a copy of) the value read with key by r, unless its owner
// may have changed since r began.
func (c *Cache[V]) Put(r Read, key string, v V) {
	if c.ttl <= 0 {
		return
	}
	owner := c.owner(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.unchangedSince(owner, r.epoch) {
		return
	}
	if len(c.entries) >= maxEntries {
		c.sweepLocked(c.clock.Now(), true)
	}
	c.entries[key] = entry[V]{value: c.clone(v), owner: owner, epoch: r.epoch, read: r.at}
}

// Share runs read for key once for the callers that ask while it runs (a
// result no older than a cache entry would be) and gives each a copy. read
// must not depend on one caller's context being alive.
func (c *Cache[V]) Share(key string, read func() (V, error)) (V, error) {
	v, err, _ := c.reads.Do(key, func() (any, error) { return read() })
	if err != nil {
		var zero V
		return zero, err
	}
	return c.clone(v.(V)), nil
}

// WaitTTL returns once every entry read before now has expired, or when
// ctx ends. It waits the TTL on a timer, the real clock's: the service's
// clock is the real one in service, and a test that moves its clock moves
// it past the TTL as well to see other instances' entries expire.
func (c *Cache[V]) WaitTTL(ctx context.Context) {
	if c.ttl <= 0 {
		return
	}
	t := time.NewTimer(c.ttl)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// unchangedSince reports whether owner id has not changed since epoch (c.mu
// held).
func (c *Cache[V]) unchangedSince(id uuid.UUID, epoch uint64) bool {
	if c.allAt > epoch {
		return false
	}
	ch, ok := c.changed[id]
	return !ok || ch.epoch <= epoch
}

// OwnerChanged records a committed change of owner id.
func (c *Cache[V]) OwnerChanged(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	now := c.clock.Now()
	c.changed[id] = change{epoch: c.epoch, at: now}
	if now.Sub(c.swept) >= c.ttl {
		c.sweepLocked(now, false)
	}
}

// AllChanged records a committed change of owners not known one by one.
func (c *Cache[V]) AllChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.allAt = c.epoch
	clear(c.entries)
}

// sweepLocked drops expired entries and the changes older than the TTL
// (every entry read before such a change has expired); full: forget every
// entry if that freed nothing.
func (c *Cache[V]) sweepLocked(now time.Time, full bool) {
	c.swept = now
	for h, e := range c.entries {
		if now.Sub(e.read) >= c.ttl {
			delete(c.entries, h)
		}
	}
	for id, ch := range c.changed {
		if now.Sub(ch.at) >= c.ttl {
			delete(c.changed, id)
		}
	}
	if full && len(c.entries) >= maxEntries {
		clear(c.entries)
	}
}

// Listener records the changes that mutations commit (store.DB.OnChange);
// changeOf says whose change a mutation is, read before it runs: (owner,
// true) for one owner, (uuid.Nil, true) for owners it cannot name (a bulk
// update), false for none of this cache's.
func (c *Cache[V]) Listener(changeOf func(ent.Mutation) (uuid.UUID, bool)) store.ChangeListener {
	return func(m ent.Mutation) func() {
		owner, ok := changeOf(m)
		switch {
		case !ok:
			return nil
		case owner == uuid.Nil:
			return c.AllChanged
		}
		return func() { c.OwnerChanged(owner) }
	}
}

// OwnerRowChange is the change of a mutation of owner rows: none for a
// creation (nobody holds the new owner's key yet), the owner for a change
// of one row, every owner for a bulk change.
func OwnerRowChange(m interface {
	Op() ent.Op
	ID() (uuid.UUID, bool)
}) (uuid.UUID, bool) {
	if m.Op().Is(ent.OpCreate) {
		return uuid.Nil, false
	}
	if id, ok := m.ID(); ok && m.Op().Is(ent.OpUpdateOne|ent.OpDeleteOne) {
		return id, true
	}
	return uuid.Nil, true
}

// HeldRowChange is the change of a mutation of rows an owner holds (its
// wallets, its keys): the owner for a creation, which names it (owner),
// every owner otherwise.
func HeldRowChange(op ent.Op, owner func() (uuid.UUID, bool)) (uuid.UUID, bool) {
	if id, ok := owner(); ok && op.Is(ent.OpCreate) {
		return id, true
	}
	return uuid.Nil, true
}
