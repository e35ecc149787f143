// Package keylock is a mutex per key in one process, that forgets a key
// once nobody holds or waits for it: a process serving many keys (the
// root package serialises the relays of each checkout session with it)
// keeps an entry only for the keys in use, not for every key it ever saw.
//
// A caller waiting for a key stops waiting when its context ends, so a
// request given up does not queue behind a slow holder.
package keylock

import (
	"context"
	"sync"
)

// Locks are the locks of every key in one process. The zero value is
// ready to use.
type Locks[K comparable] struct {
	mu    sync.Mutex
	locks map[K]*lock
}

// lock is one key's: a token held by its holder, and how many callers
// hold or wait for it (the entry goes when that falls to 0).
type lock struct {
	token chan struct{}
	refs  int
}

// Lock takes key's lock, waiting while another caller holds it, until ctx
// ends (then it returns ctx's error and holds nothing). A nil error is
// followed by one call of unlock.
func (l *Locks[K]) Lock(ctx context.Context, key K) (unlock func(), err error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[K]*lock{}
	}
	k := l.locks[key]
	if k == nil {
		k = &lock{token: make(chan struct{}, 1)}
		l.locks[key] = k
	}
	k.refs++
	l.mu.Unlock()

	select {
	case k.token <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-k.token; l.release(key, k) }) }, nil
	case <-ctx.Done():
		l.release(key, k)
		return nil, ctx.Err()
	}
}

// release drops a caller's reference to key's lock, and the entry with
// the last one.
func (l *Locks[K]) release(key K, k *lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k.refs--
	if k.refs == 0 {
		delete(l.locks, key)
	}
}

// Len is the number of keys held or waited for.
func (l *Locks[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
