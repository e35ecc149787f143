package chains

import "sync"

// LazyWatchlist is a Watchlist read when a watcher first asks it, not
// before the poll: a watcher reads the chain's head before it matches any
// transfer (Watcher), so every address issued before the list is read is
// in it, and one issued after can only be paid in a block above that head,
// which the next poll scans. A list read before the poll could miss an
// address issued, paid and mined in between (a slow RPC call, a fast
// payer): the poll would scan that block without it and the cursor move
// past the payment for good.
type LazyWatchlist struct {
	load func() (Watchlist, error)
	once sync.Once
	list Watchlist
	err  error
}

// NewLazyWatchlist is a list load builds when first asked.
func NewLazyWatchlist(load func() (Watchlist, error)) *LazyWatchlist {
	return &LazyWatchlist{load: load}
}

// Load reads the list, once; later calls answer the same list and error.
func (l *LazyWatchlist) Load() (Watchlist, error) {
	l.once.Do(func() { l.list, l.err = l.load() })
	return l.list, l.err
}

// Contains is false for every address when the list could not be read:
// the caller sees Load's error after the poll and discards what it found.
func (l *LazyWatchlist) Contains(address string) bool {
	w, err := l.Load()
	return err == nil && w != nil && w.Contains(address)
}

// Addresses lists the watched addresses (none when the list could not be
// read).
func (l *LazyWatchlist) Addresses() []string {
	w, err := l.Load()
	if err != nil || w == nil {
		return nil
	}
	return w.Addresses()
}
