package agentpay

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"

	"agentpay/ent"
	"agentpay/internal/store"
)

// The authentication caches: what a key authenticated (an agent with its
// wallets; a merchant and the key's mode) as read from the database at most
// AuthCacheTTL ago.
//
// Reading the key on every request was what an authenticated call cost
// most on PostgreSQL (one round trip, on two cores shared with the
// database). Entries are trusted for a short time only, and:
//
//   - A change this process commits to the owner (an agent or its wallets:
//     a send's counters, a trust score, a verified wallet, a new key; a
//     merchant or its keys: an update, a roll, a deactivation) drops the
//     owner's entries as it commits, so this instance never answers from
//     the owner as it was before its own change.
//   - Another instance's change shows here within the TTL.
//   - A change that must hold everywhere at once (a regenerated agent key,
//     rolled merchant keys, a deactivated merchant) answers only after the
//     TTL has passed: every instance's entry was read before the change
//     committed and has expired by then, so once the caller knows of the
//     change no instance still accepts what it revoked.
//
// Entries record the change counter as it was when their read began: an
// entry whose owner changed after that is never stored or served, so a read
// racing a commit cannot bring back what the commit replaced.

// DefaultAuthCacheTTL is how long what a key authenticated is trusted
// without reading it again.
const DefaultAuthCacheTTL = 500 * time.Millisecond

// maxAuthCacheEntries bounds the cache; past it, expired entries are swept
// and, if it is still full, everything is forgotten.
const maxAuthCacheEntries = 1 << 16

// authCache holds values of type V by key, each owned by the agent or
// merchant whose changes drop it.
type authCache[V any] struct {
	ttl   time.Duration
	owner func(V) uuid.UUID
	clone func(V) V
	// reads shares a key's read among the requests waiting for it.
	reads singleflight.Group

	mu      sync.Mutex
	epoch   uint64                   // counts the changes seen
	allAt   uint64                   // epoch of the last change to owners not known one by one
	entries map[string]authEntry[V]  // key -> value
	changed map[uuid.UUID]authChange // owner -> its last change
	swept   time.Time
}

type authEntry[V any] struct {
	value V
	owner uuid.UUID
	epoch uint64    // the epoch when the read began
	read  time.Time // when the read began
}

type authChange struct {
	epoch uint64
	at    time.Time
}

// newAuthCache returns a cache trusting entries for ttl (ttl <= 0 caches
// nothing); owner names a value's owner, clone copies a value so that
// callers may change what they get.
func newAuthCache[V any](ttl time.Duration, owner func(V) uuid.UUID, clone func(V) V) *authCache[V] {
	return &authCache[V]{ttl: ttl, owner: owner, clone: clone,
		entries: make(map[string]authEntry[V]), changed: make(map[uuid.UUID]authChange)}
}

// newAgentAuthCache caches agents (with their wallets) by API key hash.
func newAgentAuthCache(ttl time.Duration) *authCache[*ent.Agent] {
	return newAuthCache(ttl, func(a *ent.Agent) uuid.UUID { return a.ID }, copyAgent)
}

// newMerchantAuthCache caches merchants by key ("s" + secret key hash, or
// "p" + public key).
func newMerchantAuthCache(ttl time.Duration) *authCache[*MerchantAuth] {
	return newAuthCache(ttl, func(a *MerchantAuth) uuid.UUID { return a.Merchant.ID }, func(a *MerchantAuth) *MerchantAuth {
		out := *a
		m := *a.Merchant
		m.AcceptedTokens = slices.Clone(m.AcceptedTokens)
		out.Merchant = &m
		return &out
	})
}

// authRead is a read of the database begun for the cache.
type authRead struct {
	epoch uint64
	at    time.Time
}

// begin marks the start of a read whose result may be stored with put.
func (c *authCache[V]) begin() authRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	return authRead{epoch: c.epoch, at: time.Now()}
}

// get returns a copy of the value last read with key, if still trusted.
func (c *authCache[V]) get(key string) (V, bool) {
	var zero V
	if c.ttl <= 0 {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || time.Since(e.read) >= c.ttl || !c.unchangedSince(e.owner, e.epoch) {
		return zero, false
	}
	return c.clone(e.value), true
}

// put stores (a copy of) the value read with key by r, unless its owner
// may have changed since r began.
func (c *authCache[V]) put(r authRead, key string, v V) {
	if c.ttl <= 0 {
		return
	}
	owner := c.owner(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.unchangedSince(owner, r.epoch) {
		return
	}
	if len(c.entries) >= maxAuthCacheEntries {
		c.sweepLocked(time.Now(), true)
	}
	c.entries[key] = authEntry[V]{value: c.clone(v), owner: owner, epoch: r.epoch, read: r.at}
}

// waitTTL returns once every entry read before now has expired, or when
// ctx ends.
func (c *authCache[V]) waitTTL(ctx context.Context) {
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
func (c *authCache[V]) unchangedSince(id uuid.UUID, epoch uint64) bool {
	if c.allAt > epoch {
		return false
	}
	ch, ok := c.changed[id]
	return !ok || ch.epoch <= epoch
}

// ownerChanged records a committed change of owner id.
func (c *authCache[V]) ownerChanged(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	now := time.Now()
	c.changed[id] = authChange{epoch: c.epoch, at: now}
	if now.Sub(c.swept) >= c.ttl {
		c.sweepLocked(now, false)
	}
}

// allChanged records a committed change of owners not known one by one.
func (c *authCache[V]) allChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.allAt = c.epoch
	clear(c.entries)
}

// sweepLocked drops expired entries and the changes older than the TTL
// (every entry read before such a change has expired); full: forget every
// entry if that freed nothing.
func (c *authCache[V]) sweepLocked(now time.Time, full bool) {
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
	if full && len(c.entries) >= maxAuthCacheEntries {
		clear(c.entries)
	}
}

// copyAgent copies the agent and its wallets, so that callers may change
// what they get without touching the cache.
func copyAgent(a *ent.Agent) *ent.Agent {
	out := *a
	if a.Edges.Wallets != nil {
		out.Edges.Wallets = make([]*ent.Wallet, len(a.Edges.Wallets))
		for i, w := range a.Edges.Wallets {
			wc := *w
			out.Edges.Wallets[i] = &wc
		}
	}
	return &out
}

// listener records the changes that mutations commit (DB.OnChange);
// changeOf says whose change a mutation is, read before it runs: (owner,
// true) for one owner, (uuid.Nil, true) for owners it cannot name (a bulk
// update), false for none of this cache's.
func (c *authCache[V]) listener(changeOf func(ent.Mutation) (uuid.UUID, bool)) store.ChangeListener {
	return func(m ent.Mutation) func() {
		owner, ok := changeOf(m)
		switch {
		case !ok:
			return nil
		case owner == uuid.Nil:
			return c.allChanged
		}
		return func() { c.ownerChanged(owner) }
	}
}

// agentChangeOf: mutations of agents and their wallets change agents.
func agentChangeOf(m ent.Mutation) (uuid.UUID, bool) {
	switch m := m.(type) {
	case *ent.AgentMutation:
		return ownerRowChange(m)
	case *ent.WalletMutation:
		return childRowChange(m.Op(), m.AgentID)
	}
	return uuid.Nil, false
}

// merchantChangeOf: mutations of merchants and their keys change merchants.
func merchantChangeOf(m ent.Mutation) (uuid.UUID, bool) {
	switch m := m.(type) {
	case *ent.MerchantMutation:
		return ownerRowChange(m)
	case *ent.MerchantKeyMutation:
		return childRowChange(m.Op(), m.MerchantID)
	}
	return uuid.Nil, false
}

// ownerRowChange is the change of a mutation of owner rows: none for a
// creation (nobody holds the new owner's key yet), the owner for a change
// of one row, every owner for a bulk change.
func ownerRowChange(m interface {
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

// childRowChange is the change of a mutation of rows an owner holds (its
// wallets, its keys): the owner for a creation, which names it (owner),
// every owner otherwise.
func childRowChange(op ent.Op, owner func() (uuid.UUID, bool)) (uuid.UUID, bool) {
	if id, ok := owner(); ok && op.Is(ent.OpCreate) {
		return id, true
	}
	return uuid.Nil, true
}
