package chains

import (
	"context"
	"fmt"
	"math/big"
	"strings"
)

// Name identifies a supported chain as it appears in the API.
type Name string

const (
	Base     Name = "base"
	Arbitrum Name = "arbitrum"
	Ethereum Name = "ethereum"
	Polygon  Name = "polygon"
	Solana   Name = "solana"
)

// All lists every supported chain in the order the API presents them.
var All = []Name{Base, Arbitrum, Ethereum, Polygon, Solana}

// EVMChains lists the chains served by the EVM adapter.
var EVMChains = []Name{Base, Arbitrum, Ethereum, Polygon}

// IsEVM reports whether the chain is served by the EVM adapter.
func (n Name) IsEVM() bool { return n != Solana && n.Valid() }

// Valid reports whether n is a supported chain.
func (n Name) Valid() bool {
	for _, c := range All {
		if c == n {
			return true
		}
	}
	return false
}

// ParseName turns an API value into a chain name, refusing unknown chains.
func ParseName(s string) (Name, error) {
	n := Name(strings.TrimSpace(s))
	if !n.Valid() {
		return "", fmt.Errorf("unknown chain %q: expected one of base, arbitrum, ethereum, polygon, solana", s)
	}
	return n, nil
}

// TransferRequest asks a ledger to move USDC from a custodial key.
// The source pays no gas: the ledger's gas payer does.
type TransferRequest struct {
	// Key is the source's private key (EVM: 32-byte secp256k1 scalar,
	// Solana: 64-byte ed25519 private key). Never logged.
	Key []byte
	// To is the recipient wallet address (for Solana the owner, not the token account).
	To string
	// Amount in the token's base units; must be positive.
	Amount *big.Int
	// Ref identifies the logical transfer (random, one per transfer). The
	// same request sent again to a ledger while its transaction is pending
	// or included answers that transaction (or ErrAlreadyUsed) and moves
	// nothing more. On EVM it is the EIP-3009 authorization nonce, so the
	// chain itself refuses it once used, whoever relays it; on Solana a
	// ledger that did not send it must ask FindTransfer first.
	Ref [32]byte
}

// TxState is how far a submitted transaction has gone.
type TxState string

const (
	TxPending  TxState = "pending"  // broadcast, not yet included
	TxIncluded TxState = "included" // included and succeeded
	TxFailed   TxState = "failed"   // included and reverted / errored
	TxUnknown  TxState = "unknown"  // the chain does not know it (dropped or never sent)
)

// Submitted is a broadcast transaction.
type Submitted struct {
	TxHash string
	From   string // the source address of the token transfer
}

// Receipt is the observed outcome of a transaction.
type Receipt struct {
	TxHash string
	State  TxState
	Block  uint64 // block number or slot, when included
	Err    string // why it failed, when it failed
}

// Ledger moves and reads USDC on one chain.
type Ledger interface {
	Chain() Name
	// Token is the USDC contract address or mint.
	Token() string
	Decimals() int32
	// Head is the latest block number (EVM) or slot (Solana).
	Head(ctx context.Context) (uint64, error)
	// Balance of USDC held by the wallet address, in base units.
	Balance(ctx context.Context, address string) (*big.Int, error)
	// Transfer signs and broadcasts a USDC transfer; it returns once broadcast.
	// An error marked ErrRefused (ErrInsufficientFunds among them) means
	// nothing was broadcast; ErrAlreadyUsed, that the chain refuses the Ref
	// as used. After any other error the outcome is unknown: a Submitted
	// with a TxHash is what to follow, else FindTransfer tells.
	Transfer(ctx context.Context, req TransferRequest) (Submitted, error)
	// Receipt reports the state of a transaction without waiting.
	Receipt(ctx context.Context, txHash string) (Receipt, error)
	// Wait blocks until the transaction is included or failed, or ctx ends.
	Wait(ctx context.Context, txHash string) (Receipt, error)
	// ValidateAddress reports ErrInvalidAddress for a malformed wallet address.
	ValidateAddress(address string) error
	// FindTransfer looks on chain for the transaction that carried the
	// transfer q describes, so a caller that lost a Transfer's answer (a
	// crash between broadcast and recording the hash) can learn whether it
	// landed before sending it again. found is false when no included
	// transaction carries it (yet). A transaction counts only when it moves
	// exactly q.Amount of the ledger's token from q.From to q.To under q's
	// Ref, authorised by q.From: anyone can put a Ref on a transaction of
	// their own (on Solana the reference is a public key anyone may list),
	// and one that moved something else must not pass for the transfer, or
	// the caller would record a payout that never happened. EVM: the
	// EIP-3009 authorization (from, ref) and its Transfer log; Solana: a
	// TransferChecked of the mint signed by From carrying the reference
	// account derived from Ref (ReferenceKey).
	FindTransfer(ctx context.Context, q TransferQuery) (txHash string, found bool, err error)
}

// FeeReader is a Ledger that can tell what an included transaction cost
// its fee payer (the treasury, for every transaction a ledger sends):
// fee in the chain's smallest native unit (wei, lamports) and that unit's
// decimals (18, 9). Both adapters implement it; it is read once per
// transaction, when what it carried completes, for the gas metrics.
type FeeReader interface {
	TxFee(ctx context.Context, txHash string) (fee *big.Int, decimals int32, err error)
}

// CostReader is a Ledger that can tell everything an included transaction
// cost its fee payer (the treasury, for every transaction a ledger sends),
// for the gas ledger (agentpay's gas.go). Both adapters implement it.
type CostReader interface {
	TxCost(ctx context.Context, txHash string) (TxCost, error)
}

// TxCost is what one transaction cost the treasury, in the chain's
// smallest native unit (wei, lamports) with that unit's decimals.
type TxCost struct {
	// Fee is the transaction fee: gas used times the effective gas price on
	// EVM chains, the signature and priority fee on Solana.
	Fee *big.Int
	// Rent is what the fee payer's balance moved beyond the fee: on Solana
	// the rent of accounts the transaction opened for others (a recipient's
	// token account), negative when it closed one and the rent came back.
	// Always zero on EVM chains.
	Rent     *big.Int
	Decimals int32
}

// TokenAccountCloser is a Ledger whose deposit addresses hold their tokens
// in an account that costs rent (Solana's token accounts): once a sweep
// has emptied one, closing it returns the rent to the treasury. EVM
// ledgers do not implement it (an address costs nothing to keep).
type TokenAccountCloser interface {
	// CloseEmptyTokenAccount closes the token account of the wallet whose
	// key is given if it holds nothing, the rent going to the treasury,
	// which pays the fee. Idempotent: an account already closed (or never
	// opened) is Done; one still holding tokens is left, not Done.
	CloseEmptyTokenAccount(ctx context.Context, key []byte) (Closed, error)
}

// Closed is what CloseEmptyTokenAccount did.
type Closed struct {
	// Done: the account is closed (now, or before).
	Done bool
	// TxHash is the closing transaction, "" when none was sent now.
	TxHash string
}

// TransferQuery names a transfer for Ledger.FindTransfer: what a
// TransferRequest with Ref from the wallet From (the address of its Key)
// to To would have moved.
type TransferQuery struct {
	From   string
	To     string
	Amount *big.Int
	Ref    [32]byte
}

// Deposit is a USDC transfer into a watched address. Its Amount is always
// positive: watchers do not report transfers that move nothing (a
// zero-value transfer is free for anyone to send to any address), nor
// other tokens.
type Deposit struct {
	Chain  Name
	TxHash string
	// Index distinguishes several deposits in one transaction (EVM log index,
	// Solana instruction index).
	Index     uint
	From      string
	To        string // the watched wallet address (Solana: the owner)
	Amount    *big.Int
	Block     uint64 // block number or slot
	BlockHash string // EVM block hash; empty on Solana
}

// Key identifies a deposit independent of the block that carries it, so a
// deposit reorged into another block keeps its identity.
func (d Deposit) Key() string { return fmt.Sprintf("%s:%s:%d", d.Chain, d.TxHash, d.Index) }

// DepositEventKind says what happened to a deposit.
type DepositEventKind string

const (
	// DepositSeen: first seen (EVM: in a block; Solana: at commitment confirmed).
	DepositSeen DepositEventKind = "seen"
	// DepositConfirmations: its confirmation count changed.
	DepositConfirmations DepositEventKind = "confirmations"
	// DepositFinal: it reached the required depth (EVM) or finalized (Solana)
	// and is still canonical. Reported once.
	DepositFinal DepositEventKind = "final"
	// DepositRemoved: its block left the canonical chain before it was final.
	// If it is re-included it is reported seen again.
	DepositRemoved DepositEventKind = "removed"
)

// DepositEvent is one change reported by a Watcher.
type DepositEvent struct {
	Kind          DepositEventKind
	Deposit       Deposit
	Confirmations uint64
	Required      uint64
}

// Watchlist is the set of wallet addresses a watcher looks for.
type Watchlist interface {
	// Contains reports whether a (chain-normalised) address is watched.
	Contains(address string) bool
	// Addresses lists the watched addresses. No watcher reads it: both
	// families match each transfer's recipient with Contains, so a scan
	// does not cost more per address watched.
	Addresses() []string
}

// Watcher finds deposits to watched addresses and follows them to finality.
// It is driven by the caller: each Poll scans what is new since the last one
// and re-checks deposits not yet final, returning every change once. A Poll
// reads the chain's head before it asks watched about any transfer, and
// scans no further than that head: a LazyWatchlist relies on it.
type Watcher interface {
	Poll(ctx context.Context, watched Watchlist) ([]DepositEvent, error)
	// State is what a caller persists to resume after a restart.
	State() WatcherState
	// Head is the chain's head (block or slot, as Ledger.Head reads it) that
	// the latest Poll read, 0 before any did: what a scan learns of the
	// chain at no extra call, for callers that show heads.
	Head() uint64
}

// WatcherState is a watcher's resumable position.
type WatcherState struct {
	// Next is the first block (or slot) not yet scanned.
	Next uint64
	// Pending are deposits seen but not final.
	Pending []Deposit
	// Checkpoints are hashes of recently scanned blocks, ascending by
	// number, all below Next (EVM: normally ending with block Next-1). A
	// watcher resumed from them first checks them against the chain, so a
	// reorg of already scanned blocks while it was stopped is rescanned.
	// Empty on Solana and in states saved before the field existed.
	Checkpoints []BlockRef `json:"Checkpoints,omitempty"`
}

// BlockRef names one block by number and hash (0x-prefixed hex on EVM).
type BlockRef struct {
	Number uint64 `json:"Number"`
	Hash   string `json:"Hash"`
}

// DepositReader is a Ledger that can read the deposits a known transaction
// made, as its Watcher reports them: the same Deposit (TxHash, Index,
// From, Block...), so a caller that sent a payment itself can record it at
// once under the identity the deposit scan will find it by later, and the
// scan then only follows its confirmations.
type DepositReader interface {
	// DepositsIn answers the deposits the included transaction txHash made
	// to the wallet address to (Solana: the owner); none while it is not
	// included (or failed).
	DepositsIn(ctx context.Context, txHash, to string) ([]Deposit, error)
}
