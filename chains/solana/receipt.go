package solana

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
)

// Receipt reports a signature's state without waiting: included once it is
// confirmed or finalized without error, failed when it carries an error.
// A signature the node does not know is pending while this ledger sent it
// and its blockhash can still land, and unknown otherwise (never sent,
// dropped, or sent by another process: the caller decides how long to
// wait before treating unknown as dropped).
func (l *Ledger) Receipt(ctx context.Context, txHash string) (chains.Receipt, error) {
	sig, err := solana.SignatureFromBase58(txHash)
	if err != nil {
		return chains.Receipt{}, fmt.Errorf("solana: bad signature %q: %w", txHash, err)
	}
	res, err := l.rpc.GetSignatureStatuses(ctx, true, sig)
	if err != nil {
		return chains.Receipt{}, fmt.Errorf("solana: get signature status: %w", err)
	}
	out := chains.Receipt{TxHash: txHash, State: chains.TxUnknown}
	var st *rpc.SignatureStatusesResult
	if len(res.Value) == 1 {
		st = res.Value[0]
	}
	if st == nil {
		if l.sent.pending(ctx, l, sig) {
			out.State = chains.TxPending
		}
		return out, nil
	}
	switch confirmationStatus(st) {
	case rpc.ConfirmationStatusConfirmed, rpc.ConfirmationStatusFinalized:
		out.Block = st.Slot
		if st.Err != nil {
			out.State = chains.TxFailed
			out.Err = txErrString(st.Err)
		} else {
			out.State = chains.TxIncluded
		}
		l.sent.remove(sig)
	default:
		// Processed only: its fork may still be abandoned.
		out.State = chains.TxPending
	}
	return out, nil
}

// Wait polls Receipt until the transaction is included or failed. It also
// returns, with state unknown, once a transaction this ledger sent can no
// longer land because its blockhash expired.
func (l *Ledger) Wait(ctx context.Context, txHash string) (chains.Receipt, error) {
	t := time.NewTicker(l.pollInterval)
	defer t.Stop()
	for {
		r, err := l.Receipt(ctx, txHash)
		if err == nil {
			switch r.State {
			case chains.TxIncluded, chains.TxFailed:
				return r, nil
			case chains.TxUnknown:
				if l.sent.expired(txHash) {
					return r, nil
				}
			}
		}
		// A failed status read is retried: the transaction's fate does not
		// depend on one RPC answer.
		select {
		case <-ctx.Done():
			if err != nil {
				return chains.Receipt{}, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return r, ctx.Err()
		case <-t.C:
		}
	}
}

// confirmationStatus reads a status, also from nodes older than the
// confirmationStatus field, where null confirmations meant rooted.
func confirmationStatus(st *rpc.SignatureStatusesResult) rpc.ConfirmationStatusType {
	if st.ConfirmationStatus != "" {
		return st.ConfirmationStatus
	}
	switch {
	case st.Confirmations == nil:
		return rpc.ConfirmationStatusFinalized
	case *st.Confirmations > 0:
		return rpc.ConfirmationStatusConfirmed
	}
	return rpc.ConfirmationStatusProcessed
}

func txErrString(v interface{}) string {
	if s, ok := v.(string); ok {
		return s
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// sentCache remembers, for transactions this process sent, the last block
// height at which their blockhash is valid, so that "the node does not know
// it" can be told apart as "not yet" or "never".
type sentCache struct {
	mu      sync.Mutex
	entries map[solana.Signature]*sentEntry
}

type sentEntry struct {
	lastValid uint64
	expired   bool
	added     time.Time
}

// sentCacheTTL bounds the cache: a blockhash is valid for 150 blocks, about
// a minute; after ten an entry only costs memory.
const sentCacheTTL = 10 * time.Minute

func newSentCache() *sentCache {
	return &sentCache{entries: make(map[solana.Signature]*sentEntry)}
}

func (c *sentCache) add(sig solana.Signature, lastValid uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for s, e := range c.entries {
		if now.Sub(e.added) > sentCacheTTL {
			delete(c.entries, s)
		}
	}
	c.entries[sig] = &sentEntry{lastValid: lastValid, added: now}
}

func (c *sentCache) remove(sig solana.Signature) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, sig)
}

// pending reports whether sig was sent here and can still land. The block
// height is read outside the lock; an unreadable height counts as pending.
func (c *sentCache) pending(ctx context.Context, l *Ledger, sig solana.Signature) bool {
	c.mu.Lock()
	e, ok := c.entries[sig]
	if !ok {
		c.mu.Unlock()
		return false
	}
	lastValid := e.lastValid
	c.mu.Unlock()

	height, err := l.rpc.GetBlockHeight(ctx, l.commitment)
	if err != nil || height <= lastValid {
		return true
	}
	c.mu.Lock()
	e.expired = true
	c.mu.Unlock()
	return false
}

func (c *sentCache) expired(txHash string) bool {
	sig, err := solana.SignatureFromBase58(txHash)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[sig]
	return ok && e.expired
}

// TxFee is what an included transaction cost its fee payer in lamports
// (its meta's fee: signatures and priority). One getTransaction call.
func (l *Ledger) TxFee(ctx context.Context, txHash string) (*big.Int, int32, error) {
	sig, err := solana.SignatureFromBase58(txHash)
	if err != nil {
		return nil, 0, fmt.Errorf("solana: bad signature %q: %w", txHash, err)
	}
	commitment := rpc.CommitmentConfirmed
	tx, err := getTransaction(ctx, l.rpc, sig, commitment)
	if err != nil {
		return nil, 0, fmt.Errorf("solana: get transaction: %w", err)
	}
	if tx == nil || tx.Meta == nil {
		return nil, 0, fmt.Errorf("solana: transaction %s has no meta", txHash)
	}
	return new(big.Int).SetUint64(tx.Meta.Fee), 9, nil
}

// TxCost reads what the transaction cost its fee payer (the first account,
// the treasury for every transaction this ledger sends): the fee, and as
// rent whatever else left the payer's lamports (the rent-exempt deposit of
// a recipient's new token account; negative when a closed account's rent
// came back to it).
func (l *Ledger) TxCost(ctx context.Context, txHash string) (chains.TxCost, error) {
	sig, err := solana.SignatureFromBase58(txHash)
	if err != nil {
		return chains.TxCost{}, fmt.Errorf("solana: bad signature %q: %w", txHash, err)
	}
	tx, err := getTransaction(ctx, l.rpc, sig, rpc.CommitmentConfirmed)
	if err != nil {
		return chains.TxCost{}, fmt.Errorf("solana: get transaction: %w", err)
	}
	if tx == nil || tx.Meta == nil || len(tx.Meta.PreBalances) == 0 || len(tx.Meta.PostBalances) == 0 {
		return chains.TxCost{}, fmt.Errorf("solana: transaction %s has no meta", txHash)
	}
	fee := new(big.Int).SetUint64(tx.Meta.Fee)
	spent := new(big.Int).Sub(new(big.Int).SetUint64(tx.Meta.PreBalances[0]), new(big.Int).SetUint64(tx.Meta.PostBalances[0]))
	return chains.TxCost{Fee: fee, Rent: spent.Sub(spent, fee), Decimals: 9}, nil
}
