package evm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// maxSendAttempts bounds resyncs for one transaction, so a node that keeps
// disagreeing with us surfaces as an error instead of a loop.
const maxSendAttempts = 5

// nonceSender hands out the gas wallet's nonces. Many Transfer calls share
// one wallet; each needs its own nonce and none may be skipped (a gap stalls
// every later transaction). Assigning, signing and sending happen under one
// mutex, so nonces are used in order and a nonce is only consumed once the
// node accepted the transaction carrying it. Sends are quick (one RPC), so
// serialising them costs far less than repairing gaps.
type nonceSender struct {
	client Client
	from   common.Address
	logger *slog.Logger

	mu     sync.Mutex
	next   uint64
	synced bool // next is trustworthy; false until read from the node
}

// newNonceSender builds a sender that syncs from the node on first use.
func newNonceSender(client Client, from common.Address, logger *slog.Logger) *nonceSender {
	return &nonceSender{client: client, from: from, logger: logger}
}

// send signs (via build) and broadcasts a transaction at the next nonce,
// resyncing and retrying when the node says the nonce is taken.
func (n *nonceSender) send(ctx context.Context, build func(nonce uint64) (*types.Transaction, error)) (*types.Transaction, error) {
	n.mu.Lock()
	defer n.mu.Unlock()

	for attempt := 0; ; attempt++ {
		if !n.synced {
			pending, err := n.client.PendingNonceAt(ctx, n.from)
			if err != nil {
				return nil, fmt.Errorf("evm: reading gas wallet nonce: %w", err)
			}
			n.next, n.synced = pending, true
		}
		nonce := n.next
		tx, err := build(nonce)
		if err != nil {
			return nil, err
		}
		err = n.client.SendTransaction(ctx, tx)
		switch {
		case err == nil, isAlreadyKnown(err):
			// "already known" means this very transaction (same hash) is in
			// the pool: it was sent, perhaps by a retried request.
			n.next = nonce + 1
			return tx, nil
		case isNonceTaken(err):
			// Something else holds this nonce (another process, a restart,
			// a tx we lost track of): move past it. The node's pending nonce
			// is authoritative, but never go back to the nonce just refused.
			if attempt+1 >= maxSendAttempts {
				n.synced = false
				return nil, fmt.Errorf("evm: gas wallet nonce kept colliding: %w", err)
			}
			pending, perr := n.client.PendingNonceAt(ctx, n.from)
			if perr != nil {
				n.synced = false
				return nil, fmt.Errorf("evm: resyncing gas wallet nonce: %w", perr)
			}
			n.next = max(pending, nonce+1)
			n.logger.Warn("evm: gas wallet nonce resynced", "from", n.from.Hex(), "refused", nonce, "next", n.next, "reason", err.Error())
			continue
		case isDefiniteRejection(err):
			// The node refused the transaction; the nonce is still free.
			return nil, fmt.Errorf("evm: sending transaction: %w", err)
		default:
			// A transport error or timeout: the node may or may not have it.
			// Ask; if it does not, resync before the next send so a nonce
			// the node did take is not reused for a different transaction.
			if n.knows(ctx, tx.Hash()) {
				n.next = nonce + 1
				return tx, nil
			}
			n.synced = false
			return nil, fmt.Errorf("evm: sending transaction: %w", err)
		}
	}
}

// knows reports whether the node has the transaction, on a fresh short
// deadline because the caller's context may be what just expired.
func (n *nonceSender) knows(ctx context.Context, hash common.Hash) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _, err := n.client.TransactionByHash(ctx, hash)
	return err == nil
}

func isAlreadyKnown(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "already known") || strings.Contains(s, "known transaction")
}

func isNonceTaken(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "nonce too low") ||
		strings.Contains(s, "replacement transaction underpriced") ||
		strings.Contains(s, "nonce too high") ||
		strings.Contains(s, "invalid nonce")
}

// isDefiniteRejection: errors a node returns after refusing a transaction
// outright (JSON-RPC errors), as opposed to transport failures.
func isDefiniteRejection(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var rpcErr interface{ ErrorCode() int }
	if errors.As(err, &rpcErr) {
		return true
	}
	// The in-process simulated client reports pool errors as plain errors.
	s := strings.ToLower(err.Error())
	for _, m := range []string{"insufficient funds", "underpriced", "intrinsic gas", "exceeds block gas limit", "fee cap", "tip", "oversized", "invalid sender", "gas limit"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return errors.Is(err, ethereum.NotFound)
}
