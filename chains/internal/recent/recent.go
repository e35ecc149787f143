// Package recent remembers the transfers a ledger sent, per source and Ref,
// so that an adapter's Transfer answers a repeated request with the
// transaction it already sent (while that one is pending or included)
// instead of sending another; and it serialises the sends of one pair.
package recent

import (
	"context"
	"sync"
	"time"

	"agentpay/chains"
)

// Transfers is the memory of one ledger; K is the adapter's address type.
type Transfers[K comparable] struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[key[K]]entry
	locks   map[key[K]]*refLock
	puts    int
}

type key[K comparable] struct {
	from K
	ref  [32]byte
}

type entry struct {
	sub chains.Submitted
	at  time.Time
}

type refLock struct {
	mu   sync.Mutex
	refs int
}

// New remembers each transfer for ttl: as long as it may still land (or
// longer).
func New[K comparable](ttl time.Duration) *Transfers[K] {
	return &Transfers[K]{ttl: ttl, entries: map[key[K]]entry{}, locks: map[key[K]]*refLock{}}
}

// Lock serialises work on one (source, Ref); the returned func unlocks.
func (r *Transfers[K]) Lock(from K, ref [32]byte) func() {
	k := key[K]{from, ref}
	r.mu.Lock()
	l := r.locks[k]
	if l == nil {
		l = &refLock{}
		r.locks[k] = l
	}
	l.refs++
	r.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		r.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(r.locks, k)
		}
		r.mu.Unlock()
	}
}

// Alive is the transfer last sent for (from, ref) when receipt says it is
// pending or included: a repeated request must answer it rather than send
// another. One that failed or was dropped is not alive (nothing of it
// moved). When receipt fails it is unknown whether the earlier send lives:
// the caller must not send again, but return the error.
func (r *Transfers[K]) Alive(ctx context.Context, from K, ref [32]byte, receipt func(context.Context, string) (chains.Receipt, error)) (chains.Submitted, bool, error) {
	r.mu.Lock()
	e, ok := r.entries[key[K]{from, ref}]
	r.mu.Unlock()
	if !ok || time.Since(e.at) > r.ttl {
		return chains.Submitted{}, false, nil
	}
	rc, err := receipt(ctx, e.sub.TxHash)
	if err != nil {
		return chains.Submitted{}, false, err
	}
	if rc.State == chains.TxPending || rc.State == chains.TxIncluded {
		return e.sub, true, nil
	}
	return chains.Submitted{}, false, nil
}

// Put remembers the transfer sent for (from, ref).
func (r *Transfers[K]) Put(from K, ref [32]byte, sub chains.Submitted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.entries[key[K]{from, ref}] = entry{sub: sub, at: now}
	// Expired entries are swept every so often rather than on each put,
	// keeping put O(1) amortised.
	if r.puts++; r.puts%1024 == 0 {
		for k, e := range r.entries {
			if now.Sub(e.at) > r.ttl {
				delete(r.entries, k)
			}
		}
	}
}
