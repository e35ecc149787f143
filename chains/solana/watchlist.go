package solana

import (
	"github.com/gagliardetto/solana-go"

	"agentpay/chains"
)

// Watchlist is a fixed set of watched owner addresses, a hash set the
// watcher looks each transfer's owner up in.
type Watchlist struct {
	set   map[solana.PublicKey]struct{}
	addrs []string
}

var _ chains.Watchlist = (*Watchlist)(nil)

// NewWatchlist watches the given owner (wallet) addresses. Malformed
// addresses are left out: they cannot receive anything.
func NewWatchlist(owners []string) chains.Watchlist {
	w := &Watchlist{set: make(map[solana.PublicKey]struct{}, len(owners))}
	for _, o := range owners {
		pk, err := solana.PublicKeyFromBase58(o)
		if err != nil {
			continue
		}
		if _, dup := w.set[pk]; dup {
			continue
		}
		w.set[pk] = struct{}{}
		w.addrs = append(w.addrs, pk.String())
	}
	return w
}

// Contains reports whether the owner address is watched.
func (w *Watchlist) Contains(address string) bool {
	pk, err := solana.PublicKeyFromBase58(address)
	if err != nil {
		return false
	}
	_, ok := w.set[pk]
	return ok
}

// containsKey is Contains on a decoded key: what the watcher asks for each
// transfer it reads, without encoding the key back to base58.
func (w *Watchlist) containsKey(pk solana.PublicKey) bool {
	_, ok := w.set[pk]
	return ok
}

// Addresses lists the watched owners in canonical base58.
func (w *Watchlist) Addresses() []string { return append([]string(nil), w.addrs...) }
