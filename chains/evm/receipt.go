package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"agentpay/chains"
)

// IndexingInProgress reports geth's answer for a receipt asked while its
// transaction indexer is still catching up (right after start or a burst
// of blocks): not an error, the receipt will be there shortly.
func IndexingInProgress(err error) bool {
	return err != nil && strings.Contains(err.Error(), "transaction indexing is in progress")
}

// Receipt reports a transaction's state without waiting. A reverted
// transaction is TxFailed with the revert reason when the node can replay it.
func (l *Ledger) Receipt(ctx context.Context, txHash string) (chains.Receipt, error) {
	hash, err := parseTxHash(txHash)
	if err != nil {
		return chains.Receipt{}, err
	}
	out := chains.Receipt{TxHash: hash.Hex()}
	rc, err := l.client.TransactionReceipt(ctx, hash)
	if IndexingInProgress(err) {
		// The node has the block but has not indexed its transactions yet.
		out.State = chains.TxPending
		return out, nil
	}
	if errors.Is(err, ethereum.NotFound) {
		_, _, err := l.client.TransactionByHash(ctx, hash)
		switch {
		case errors.Is(err, ethereum.NotFound):
			out.State = chains.TxUnknown
		case err != nil:
			return chains.Receipt{}, fmt.Errorf("evm: %s: reading transaction: %w", l.cfg.Chain, err)
		default:
			// Known but without a receipt: pending, or mined a moment ago
			// and not yet indexed; the next look will tell.
			out.State = chains.TxPending
		}
		return out, nil
	}
	if err != nil {
		return chains.Receipt{}, fmt.Errorf("evm: %s: reading receipt: %w", l.cfg.Chain, err)
	}
	// geth makes a block's receipts readable a moment before the block is
	// its head (and behind a load balancer the receipt may come from a
	// node ahead of the one answering the next call): until the head has
	// reached the block, balances read at "latest" may not show the
	// transfer yet, and a send completed on this receipt would let the next
	// balance check count the money twice.
	head, err := l.client.BlockNumber(ctx)
	if err != nil {
		return chains.Receipt{}, fmt.Errorf("evm: %s: reading head: %w", l.cfg.Chain, err)
	}
	if head < rc.BlockNumber.Uint64() {
		out.State = chains.TxPending
		return out, nil
	}
	out.Block = rc.BlockNumber.Uint64()
	if rc.Status == types.ReceiptStatusSuccessful {
		out.State = chains.TxIncluded
		return out, nil
	}
	out.State = chains.TxFailed
	out.Err = l.failureReason(ctx, hash, rc)
	return out, nil
}

// Wait polls Receipt every PollInterval until the transaction is included
// or failed, or ctx ends. An unknown transaction keeps being polled, since
// a freshly broadcast one may not have reached the node yet; the caller's
// deadline decides when to give up.
func (l *Ledger) Wait(ctx context.Context, txHash string) (chains.Receipt, error) {
	t := time.NewTicker(l.cfg.PollInterval)
	defer t.Stop()
	for {
		r, err := l.Receipt(ctx, txHash)
		if err == nil && (r.State == chains.TxIncluded || r.State == chains.TxFailed) {
			return r, nil
		}
		if err != nil && ctx.Err() == nil && errors.Is(err, errBadTxHash) {
			return r, err
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return r, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return r, ctx.Err()
		case <-t.C:
		}
	}
}

// failureReason replays a reverted transaction against the state before its
// block to recover the revert message. Earlier transactions of the same
// block are not replayed, so this is best effort; it falls back to saying
// whether the transaction ran out of gas.
func (l *Ledger) failureReason(ctx context.Context, hash common.Hash, rc *types.Receipt) string {
	tx, _, err := l.client.TransactionByHash(ctx, hash)
	if err != nil {
		return "reverted"
	}
	if rc.GasUsed >= tx.Gas() {
		return "out of gas"
	}
	from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
	if err != nil || rc.BlockNumber == nil || rc.BlockNumber.Sign() == 0 {
		return "reverted"
	}
	msg := ethereum.CallMsg{From: from, To: tx.To(), Gas: tx.Gas(), Value: tx.Value(), Data: tx.Data()}
	parent := new(big.Int).Sub(rc.BlockNumber, big.NewInt(1))
	if _, err := l.client.CallContract(ctx, msg, parent); err != nil {
		if reason := revertReason(err); reason != "" {
			return "reverted: " + reason
		}
	}
	return "reverted"
}

var errBadTxHash = errors.New("evm: malformed transaction hash")

func parseTxHash(s string) (common.Hash, error) {
	b, err := hexutil.Decode(s)
	if err != nil || len(b) != common.HashLength {
		return common.Hash{}, errBadTxHash
	}
	return common.BytesToHash(b), nil
}

// TxFee is what an included transaction cost its sender in wei: gas used
// times the effective gas price. On rollups (Base, Arbitrum) the L1 data
// fee some of them charge on top is not in go-ethereum's receipt and is not
// counted.
func (l *Ledger) TxFee(ctx context.Context, txHash string) (*big.Int, int32, error) {
	hash, err := parseTxHash(txHash)
	if err != nil {
		return nil, 0, err
	}
	rc, err := l.client.TransactionReceipt(ctx, hash)
	if err != nil {
		return nil, 0, fmt.Errorf("evm: %s: reading receipt: %w", l.cfg.Chain, err)
	}
	if rc.EffectiveGasPrice == nil {
		return nil, 0, fmt.Errorf("evm: %s: receipt of %s has no effective gas price", l.cfg.Chain, txHash)
	}
	return new(big.Int).Mul(new(big.Int).SetUint64(rc.GasUsed), rc.EffectiveGasPrice), 18, nil
}

// TxCost is TxFee as a chains.TxCost: an EVM transaction costs its fee
// payer gas only (no rent).
func (l *Ledger) TxCost(ctx context.Context, txHash string) (chains.TxCost, error) {
	fee, decimals, err := l.TxFee(ctx, txHash)
	if err != nil {
		return chains.TxCost{}, err
	}
	return chains.TxCost{Fee: fee, Rent: new(big.Int), Decimals: decimals}, nil
}
