package evm

import (
	"fmt"
	"log/slog"
	"time"

	"agentpay/chains"
)

// Config configures the EVM adapter for one chain. The same Config serves
// New (the ledger) and NewWatcher, so a chain is wired from one place.
type Config struct {
	// Chain is the chain's API name (base, arbitrum, ethereum, polygon).
	Chain chains.Name

	// RPCURL is the node's JSON-RPC endpoint (http(s) or ws(s)). Ignored
	// when Client is set.
	RPCURL string

	// Client, when set, is used instead of dialing RPCURL; tests pass the
	// simulated backend's in-process client here. The adapter never closes
	// a client it did not dial.
	Client Client

	// ChainID the node must report. Zero accepts whatever the node reports;
	// a mismatch fails construction so that nothing is ever signed for the
	// wrong chain.
	ChainID uint64

	// USDC is the token contract address (FiatToken v2 or compatible).
	USDC string

	// Decimals of the token. Zero means 6. When the token answers
	// decimals(), a different value fails construction.
	Decimals int32

	// GasKey is the relayer's 32-byte secp256k1 key: it signs and pays gas
	// for every relayed transfer. Nil makes a read-only ledger whose
	// Transfer fails with ErrNoGasKey. Never logged.
	GasKey []byte

	// Confirmations a deposit needs to be final, counting its own block
	// (1 = included). Zero means 1.
	Confirmations uint64

	// ScanBatch is the most blocks asked of one eth_getLogs call; public
	// providers cap ranges (often at 500 to 2,000 blocks). Zero means 500.
	ScanBatch uint64

	// MaxScanPerPoll bounds how many blocks one Poll scans, so a watcher far
	// behind catches up over several bounded polls instead of one that may
	// outlive its context. Zero means 20 batches.
	MaxScanPerPoll uint64

	// StartBlock is the first block a watcher scans when it has no saved
	// state. Zero means the chain head at construction: a new watcher looks
	// forward, never through history.
	StartBlock uint64

	// ReorgWindow is how many recent scan checkpoints (block number and
	// hash) a watcher remembers to find where a reorg forked. Zero means 256.
	ReorgWindow int

	// PollInterval is how often Wait asks for a receipt. Zero means 1s.
	PollInterval time.Duration

	// RPCTimeout bounds each call to the node, whatever the caller's
	// context allows. Zero means chains.DefaultRPCTimeout.
	RPCTimeout time.Duration

	// StartPatience is how long New keeps asking the node when the reads
	// of its checks (chain id, token code, decimals, domain) fail: a
	// failed call is retried, a wrong answer is not. Zero means
	// DefaultStartPatience.
	StartPatience time.Duration

	// AuthorizationTTL is how long a signed EIP-3009 authorization stays
	// valid (its validBefore). Zero means one hour.
	AuthorizationTTL time.Duration

	// GasMargin is added to the gas estimate, in percent, because the
	// estimate is taken against a state other transfers may change before
	// inclusion. Zero means 25.
	GasMargin uint64

	// Logger receives warnings such as nonce resyncs. Nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults validates the config and fills its zero values.
func (c Config) withDefaults() (Config, error) {
	if !c.Chain.IsEVM() {
		return c, fmt.Errorf("evm: chain %q is not an EVM chain", c.Chain)
	}
	if c.Client == nil && c.RPCURL == "" {
		return c, fmt.Errorf("evm: %s: RPCURL or Client is required", c.Chain)
	}
	if err := ValidateAddress(c.USDC); err != nil {
		return c, fmt.Errorf("evm: %s: USDC address %q: %w", c.Chain, c.USDC, err)
	}
	if c.Decimals == 0 {
		c.Decimals = 6
	}
	if c.Confirmations == 0 {
		c.Confirmations = 1
	}
	if c.ScanBatch == 0 {
		c.ScanBatch = 500
	}
	if c.MaxScanPerPoll == 0 {
		c.MaxScanPerPoll = 20 * c.ScanBatch
	}
	if c.ReorgWindow <= 0 {
		c.ReorgWindow = 256
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = chains.DefaultRPCTimeout
	}
	if c.StartPatience <= 0 {
		c.StartPatience = DefaultStartPatience
	}
	if c.AuthorizationTTL <= 0 {
		c.AuthorizationTTL = time.Hour
	}
	if c.GasMargin == 0 {
		c.GasMargin = 25
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// DefaultStartPatience is Config.StartPatience when zero: long enough for a
// node failing one call in ten to pass the checks, short enough that a
// node that is down stops the start while someone is watching it.
const DefaultStartPatience = 30 * time.Second
