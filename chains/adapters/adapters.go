// Package adapters wires the chain adapters (chains/evm, chains/solana) into
// the chains interfaces the service is configured with. It is the one place
// that knows which adapter serves which chain: cmd/agentpay and tests use
// it; the service itself never does.
package adapters

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"agentpay/chains"
	"agentpay/chains/evm"
	"agentpay/chains/solana"
	"agentpay/internal/redact"
)

// Families are the wallets of every chain family.
func Families() chains.Families {
	return chains.Families{
		chains.FamilyEVM:    evm.Wallets{},
		chains.FamilySolana: solana.Wallets{},
	}
}

// Chain says how to reach one chain.
type Chain struct {
	RPCURL string
	// USDC is the token contract (EVM) or mint (Solana).
	USDC string
	// Confirmations a deposit needs: the block depth on EVM chains; on
	// Solana the depth shown to payers, finality itself decides.
	Confirmations uint64
	// GasKey is the treasury's key of the chain's family: it pays the gas
	// of every transfer on EVM chains, the fees and new accounts' rent on
	// Solana.
	GasKey []byte
	// PollInterval is how often Ledger.Wait asks about a transaction; 0 is
	// the adapter's default.
	PollInterval time.Duration
	// RPCTimeout bounds each call to the chain's node, the ledger's and the
	// watcher's alike; 0 is chains.DefaultRPCTimeout.
	RPCTimeout time.Duration
	// StartPatience is how long an EVM ledger's start keeps asking a node
	// that fails its reads; 0 is evm.DefaultStartPatience.
	StartPatience time.Duration
	// StartInBackground lets the chain's node fail its start-time checks
	// without failing the start: the chain is served not ready
	// (ErrChainStarting) while the checks are asked again in the
	// background until ctx ends (startEVM). Processes set it; tests that
	// want a dead node to fail at once leave it off.
	StartInBackground bool
	// Logger reports the background start; nil discards.
	Logger *slog.Logger
}

// Network connects a chain's ledger and its deposit watcher factory.
func Network(ctx context.Context, name chains.Name, c Chain) (chains.Network, error) {
	if !name.Valid() {
		return chains.Network{}, fmt.Errorf("unknown chain %q", name)
	}
	if name.IsEVM() {
		cfg := evm.Config{
			Chain:         name,
			RPCURL:        c.RPCURL,
			USDC:          c.USDC,
			GasKey:        c.GasKey,
			Confirmations: c.Confirmations,
			PollInterval:  c.PollInterval,
			RPCTimeout:    c.RPCTimeout,
			StartPatience: c.StartPatience,
		}
		var (
			l   chains.Ledger
			err error
		)
		if c.StartInBackground {
			l, err = startEVM(ctx, cfg, c.Logger)
		} else {
			l, err = evm.New(ctx, cfg)
		}
		if err != nil {
			return chains.Network{}, fmt.Errorf("chain %s (%s): %w", name, redact.URL(c.RPCURL), err)
		}
		newWatcher := func(ctx context.Context, st chains.WatcherState) (chains.Watcher, error) {
			return l.(*evm.Ledger).NewWatcher(ctx, st)
		}
		if p, ok := l.(*pendingLedger); ok {
			newWatcher = p.newWatcher
		}
		return chains.Network{
			Ledger:        l,
			NewWatcher:    newWatcher,
			NewWatchlist:  evm.NewWatchlist,
			Confirmations: c.Confirmations,
		}, nil
	}
	l, err := solana.New(ctx, solana.Config{RPCURL: c.RPCURL, Mint: c.USDC, FeePayer: c.GasKey, PollInterval: c.PollInterval, RPCTimeout: c.RPCTimeout})
	if err != nil {
		return chains.Network{}, fmt.Errorf("chain %s (%s): %w", name, redact.URL(c.RPCURL), err)
	}
	return chains.Network{
		Ledger: l,
		NewWatcher: func(ctx context.Context, st chains.WatcherState) (chains.Watcher, error) {
			return solana.NewWatcher(solana.WatcherConfig{RPCURL: c.RPCURL, Mint: c.USDC, Required: c.Confirmations, State: st, RPCTimeout: c.RPCTimeout})
		},
		NewWatchlist:  solana.NewWatchlist,
		Confirmations: c.Confirmations,
	}, nil
}
