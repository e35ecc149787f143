package chains

import (
	"context"
	"time"
)

// DefaultRPCTimeout bounds each call an adapter makes to a chain's node
// unless configured otherwise: a node that takes a request and never
// answers must not hold its caller (a send's database work, a scan job)
// for ever. Ten seconds is far above a healthy answer (a few hundred
// milliseconds, an eth_getLogs over a large range a few seconds) and still
// short enough to fail a request before its client gives up.
const DefaultRPCTimeout = 10 * time.Second

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
