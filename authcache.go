package agentpay

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"

	"agentpay/ent"
)

// The authentication cache: an authenticated request's agent (with its
// wallets) as read from the database at most AuthCacheTTL ago.
//
// Reading the key on every request was what an authenticated read cost
// most on PostgreSQL (one round trip, on two cores shared with the
// database). Entries are trusted for a short time only, and:
//
//   - A change this process commits to an agent or its wallets (through
//     ent: a send's counters, a trust score, a verified wallet, a new key)
//     drops that agent's entries as it commits, so this instance never
//     answers from the agent as it was before its own change.
//   - Another instance's change shows here within the TTL.
//   - A key regeneration answers only after the TTL has passed
//     (RegenerateAPIKey): every instance's entry for the old key was read
//     before the change committed and has expired by then, so once the
//     caller has the new key the old one is refused everywhere.
//
// Entries record the change counter as it was when their read began: an
// entry whose agent changed after that is never stored or served, so a read
// racing a commit cannot bring back what the commit replaced.

// DefaultAuthCacheTTL is how long an authenticated agent is trusted without
// reading it again.
const DefaultAuthCacheTTL = 500 * time.Millisecond

// maxAuthCacheEntries bounds the cache; past it, expired entries are swept
// and, if it is still full, everything is forgotten.
const maxAuthCacheEntries = 1 << 16

type authCache struct {
	ttl time.Duration
	// reads shares a key's read among the requests waiting for it.
	reads singleflight.Group

	mu      sync.Mutex
	epoch   uint64                   // counts the changes seen
	allAt   uint64                   // epoch of the last change to any agent (a bulk update)
	entries map[string]authEntry     // API key hash -> agent
	changed map[uuid.UUID]authChange // agent -> its last change
	swept   time.Time
}

type authEntry struct {
	agent *ent.Agent
	epoch uint64    // the epoch when the read began
	read  time.Time // when the read began
}

type authChange struct {
	epoch uint64
	at    time.Time
}

// newAuthCache returns a cache trusting entries for ttl; ttl <= 0 caches
// nothing.
func newAuthCache(ttl time.Duration) *authCache {
	return &authCache{ttl: ttl, entries: make(map[string]authEntry), changed: make(map[uuid.UUID]authChange)}
}

// authRead is a read of the database begun for the cache.
type authRead struct {
	epoch uint64
	at    time.Time
}

// begin marks the start of a read whose result may be stored with put.
func (c *authCache) begin() authRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	return authRead{epoch: c.epoch, at: time.Now()}
}

// get returns a copy of the agent last read with hash, if still trusted.
func (c *authCache) get(hash string) *ent.Agent {
	if c.ttl <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || time.Since(e.read) >= c.ttl || !c.unchangedSince(e.agent.ID, e.epoch) {
		return nil
	}
	return copyAgent(e.agent)
}

// put stores the agent read with hash by r (a copy of it), unless it may
// have changed since r began.
func (c *authCache) put(r authRead, hash string, a *ent.Agent) {
	if c.ttl <= 0 || a == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.unchangedSince(a.ID, r.epoch) {
		return
	}
	if len(c.entries) >= maxAuthCacheEntries {
		c.sweepLocked(time.Now(), true)
	}
	c.entries[hash] = authEntry{agent: copyAgent(a), epoch: r.epoch, read: r.at}
}

// unchangedSince reports whether agent id has not changed since epoch (c.mu
// held).
func (c *authCache) unchangedSince(id uuid.UUID, epoch uint64) bool {
	if c.allAt > epoch {
		return false
	}
	ch, ok := c.changed[id]
	return !ok || ch.epoch <= epoch
}

// agentChanged records a committed change of agent id.
func (c *authCache) agentChanged(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	now := time.Now()
	c.changed[id] = authChange{epoch: c.epoch, at: now}
	if now.Sub(c.swept) >= c.ttl {
		c.sweepLocked(now, false)
	}
}

// allChanged records a committed change of agents not known one by one.
func (c *authCache) allChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.allAt = c.epoch
	clear(c.entries)
}

// sweepLocked drops expired entries and the changes older than the TTL
// (every entry read before such a change has expired); full: forget every
// entry if that freed nothing.
func (c *authCache) sweepLocked(now time.Time, full bool) {
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

// hook records the changes that mutations of agents and wallets commit.
func (c *authCache) hook(next ent.Mutator) ent.Mutator {
	return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
		var (
			changed func()
			tx      *ent.Tx
		)
		switch m := m.(type) {
		case *ent.AgentMutation:
			if id, ok := m.ID(); ok && m.Op().Is(ent.OpUpdateOne|ent.OpDeleteOne) {
				changed = func() { c.agentChanged(id) }
			} else if !m.Op().Is(ent.OpCreate) {
				changed = c.allChanged
			}
			tx, _ = m.Tx()
		case *ent.WalletMutation:
			if id, ok := m.AgentID(); ok && m.Op().Is(ent.OpCreate) {
				changed = func() { c.agentChanged(id) }
			} else {
				changed = c.allChanged
			}
			tx, _ = m.Tx()
		}
		v, err := next.Mutate(ctx, m)
		if err != nil || changed == nil {
			return v, err
		}
		if tx == nil {
			changed()
			return v, nil
		}
		tx.OnCommit(func(next ent.Committer) ent.Committer {
			return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
				err := next.Commit(ctx, tx)
				if err == nil {
					changed()
				}
				return err
			})
		})
		return v, nil
	})
}
