// Package solana is the Solana adapter: it moves and reads SPL USDC through a
// standard JSON-RPC node and finds deposits to watched wallets. Wallets is
// Solana's keys (SLIP-0010), addresses and Solana Pay payment URIs.
//
// Wallet addresses are owners (system accounts); their USDC lives in the
// associated token account (ATA) for the configured mint. The service's keys
// hold no SOL: the treasury is the fee payer of every transfer and pays the
// rent of recipient token accounts it creates. It is also the fee payer of
// x402 exact payments (exact.go): transactions a payer signs and the
// treasury co-signs, after checking it pays for nothing but their fee.
package solana

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
	"agentpay/chains/internal/recent"
)

// Config configures a Ledger.
type Config struct {
	// RPCURL is the JSON-RPC endpoint of a Solana node.
	RPCURL string
	// Mint is the USDC mint address (base58).
	Mint string
	// Decimals of the mint; 6 for USDC. Zero means 6. Transfers are
	// TransferChecked, so a wrong value is refused by the token program.
	Decimals int32
	// FeePayer is the treasury's 64-byte ed25519 private key. It pays the
	// fees of every transfer and the rent of token accounts it creates.
	FeePayer []byte
	// Commitment for reads, blockhashes and preflight. Default confirmed.
	Commitment rpc.CommitmentType
	// PollInterval is how often Wait asks for a signature's status.
	// Default 400ms (about one slot).
	PollInterval time.Duration
	// PriorityFee, in micro-lamports per compute unit, is added to each
	// transfer when positive; busy clusters drop transactions without one.
	PriorityFee uint64
	// ComputeUnitLimit caps a transfer's compute units when PriorityFee is
	// set, so the priority fee stays small. Default 60,000 (an ATA create
	// plus TransferChecked use about 30,000).
	ComputeUnitLimit uint32
	// RPCTimeout bounds each call to the node, whatever the caller's
	// context allows. Default chains.DefaultRPCTimeout.
	RPCTimeout time.Duration
}

// Ledger implements chains.Ledger for SPL USDC on Solana.
type Ledger struct {
	rpc          *rpc.Client
	mint         solana.PublicKey
	decimals     int32
	feePayer     solana.PrivateKey
	commitment   rpc.CommitmentType
	pollInterval time.Duration
	priorityFee  uint64
	unitLimit    uint32
	sent         *sentCache
	// genesisHash names the cluster the node is on (base58), read at start.
	genesisHash string
	// byRef remembers what this ledger sent per (source, Ref) while it may
	// land, and serialises sends of the same pair.
	byRef *recent.Transfers[solana.PublicKey]
}

var _ chains.Ledger = (*Ledger)(nil)
var _ chains.FeeReader = (*Ledger)(nil)

// New checks the configuration and the mint and returns a Ledger.
func New(ctx context.Context, cfg Config) (*Ledger, error) {
	if cfg.RPCURL == "" {
		return nil, errors.New("solana: RPC URL is required")
	}
	mint, err := solana.PublicKeyFromBase58(cfg.Mint)
	if err != nil {
		return nil, fmt.Errorf("solana: mint %q: %w", cfg.Mint, err)
	}
	feePayer, err := privateKey(cfg.FeePayer)
	if err != nil {
		return nil, fmt.Errorf("solana: fee payer: %w", err)
	}
	if cfg.Decimals == 0 {
		cfg.Decimals = 6
	}
	if cfg.Decimals < 0 || cfg.Decimals > 18 {
		return nil, fmt.Errorf("solana: decimals %d out of range", cfg.Decimals)
	}
	if cfg.Commitment == "" {
		cfg.Commitment = rpc.CommitmentConfirmed
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 400 * time.Millisecond
	}
	if cfg.ComputeUnitLimit == 0 {
		cfg.ComputeUnitLimit = 60_000
	}
	client, err := newRPC(cfg.RPCURL, cfg.RPCTimeout)
	if err != nil {
		return nil, fmt.Errorf("solana: RPC URL: %w", err)
	}
	l := &Ledger{
		rpc:          client,
		mint:         mint,
		decimals:     cfg.Decimals,
		feePayer:     feePayer,
		commitment:   cfg.Commitment,
		pollInterval: cfg.PollInterval,
		priorityFee:  cfg.PriorityFee,
		unitLimit:    cfg.ComputeUnitLimit,
		sent:         newSentCache(),
		byRef:        recent.New[solana.PublicKey](sentCacheTTL),
	}
	// Checking the mint at start turns a wrong mint or a dead RPC into a
	// start-up error instead of failed transfers later.
	if err := l.checkMint(ctx); err != nil {
		return nil, err
	}
	// The cluster, read once as EVM's chain id is: what x402 names the
	// network by (GenesisHash).
	gh, err := l.rpc.GetGenesisHash(ctx)
	if err != nil {
		return nil, fmt.Errorf("solana: reading the genesis hash: %w", err)
	}
	l.genesisHash = gh.String()
	return l, nil
}

// GenesisHash is the genesis hash of the cluster the node is on (base58),
// which tells mainnet-beta, devnet, testnet and a local cluster apart.
func (l *Ledger) GenesisHash() string { return l.genesisHash }

func (l *Ledger) checkMint(ctx context.Context) error {
	res, err := l.rpc.GetAccountInfoWithOpts(ctx, l.mint, &rpc.GetAccountInfoOpts{
		Encoding:   solana.EncodingBase64,
		Commitment: l.commitment,
	})
	if errors.Is(err, rpc.ErrNotFound) {
		return fmt.Errorf("solana: mint %s does not exist", l.mint)
	}
	if err != nil {
		return fmt.Errorf("solana: read mint %s: %w", l.mint, err)
	}
	if !res.Value.Owner.Equals(solana.TokenProgramID) {
		return fmt.Errorf("solana: mint %s is not owned by the SPL token program", l.mint)
	}
	// SPL mint layout: decimals is the byte at offset 44.
	data := res.Value.Data.GetBinary()
	if len(data) < 82 {
		return fmt.Errorf("solana: mint %s: account is not a mint", l.mint)
	}
	if int32(data[44]) != l.decimals {
		return fmt.Errorf("solana: mint %s has %d decimals, configured %d", l.mint, data[44], l.decimals)
	}
	return nil
}

// Client is the underlying RPC client, for callers that need a method the
// Ledger does not wrap.
func (l *Ledger) Client() *rpc.Client { return l.rpc }

func (l *Ledger) Chain() chains.Name { return chains.Solana }

func (l *Ledger) Token() string { return l.mint.String() }

func (l *Ledger) Decimals() int32 { return l.decimals }

// FeePayer is the treasury's address.
func (l *Ledger) FeePayer() string { return l.feePayer.PublicKey().String() }

// Head is the latest slot at the configured commitment.
func (l *Ledger) Head(ctx context.Context) (uint64, error) {
	slot, err := l.rpc.GetSlot(ctx, l.commitment)
	if err != nil {
		return 0, fmt.Errorf("solana: get slot: %w", err)
	}
	return slot, nil
}

// Balance is the USDC in the owner's associated token account, 0 when it
// has none. Only the ATA counts: it is the account Transfer spends from and
// the Watcher watches, so a balance held elsewhere would be money the
// service shows but cannot move.
func (l *Ledger) Balance(ctx context.Context, address string) (*big.Int, error) {
	owner, err := parseAddress(address)
	if err != nil {
		return nil, err
	}
	ata, err := associatedTokenAddress(owner, l.mint)
	if err != nil {
		return nil, err
	}
	res, err := l.rpc.GetAccountInfoWithOpts(ctx, ata, &rpc.GetAccountInfoOpts{
		Encoding:   solana.EncodingBase64,
		Commitment: l.commitment,
	})
	if errors.Is(err, rpc.ErrNotFound) {
		return new(big.Int), nil
	}
	if err != nil {
		return nil, fmt.Errorf("solana: read token account %s: %w", ata, err)
	}
	acc, ok := decodeTokenAccount(res.Value)
	if !ok || !acc.Mint.Equals(l.mint) {
		// A closed-then-reused address or a foreign account at the ATA
		// address cannot hold our USDC.
		return new(big.Int), nil
	}
	return new(big.Int).SetUint64(acc.Amount), nil
}

// ValidateAddress accepts a base58 32-byte public key.
func (l *Ledger) ValidateAddress(address string) error {
	_, err := parseAddress(address)
	return err
}

// ValidateAddress is Ledger.ValidateAddress without a ledger, for callers
// that check input before any RPC is configured.
func ValidateAddress(address string) error {
	_, err := parseAddress(address)
	return err
}

func parseAddress(address string) (solana.PublicKey, error) {
	pk, err := solana.PublicKeyFromBase58(address)
	if err != nil || address == "" {
		return solana.PublicKey{}, fmt.Errorf("%w: %q is not a Solana address", chains.ErrInvalidAddress, address)
	}
	return pk, nil
}

// privateKey checks that key is a 64-byte ed25519 private key whose second
// half is the public key of its seed, so a corrupted key fails here and not
// as a signature error from the node.
func privateKey(key []byte) (solana.PrivateKey, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("private key must be %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	derived := ed25519.NewKeyFromSeed(key[:ed25519.SeedSize])
	if !derived.Equal(ed25519.PrivateKey(key)) {
		return nil, errors.New("private key does not match its public key")
	}
	return solana.PrivateKey(append([]byte(nil), key...)), nil
}
