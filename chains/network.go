package chains

import "context"

// Network is one configured chain: its ledger, and how to build a deposit
// watcher resuming from saved state.
type Network struct {
	Ledger     Ledger
	NewWatcher WatcherFactory
	// NewWatchlist builds the chain's address set (each chain normalises
	// addresses its own way).
	NewWatchlist func(addresses []string) Watchlist
	// Confirmations a deposit needs on this chain (on Solana: the usual
	// depth of finalization, shown to payers; finality itself decides).
	Confirmations uint64
}

// WatcherFactory builds a chain's deposit watcher from its saved state.
type WatcherFactory func(ctx context.Context, state WatcherState) (Watcher, error)

// Networks holds each configured chain of one mode. A chain missing here has
// no RPC configured for that mode.
type Networks map[Name]Network
