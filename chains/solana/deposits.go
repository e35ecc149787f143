package solana

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
)

// DepositsIn reads the transaction txHash at commitment confirmed (where
// the Watcher first reports a deposit) and answers its increase of to's
// associated token account of the mint, decoded by the scan's own
// creditsIn (chains.DepositReader), so both name the deposit alike. A
// transaction not yet confirmed, unknown or failed made none.
func (l *Ledger) DepositsIn(ctx context.Context, txHash, to string) ([]chains.Deposit, error) {
	sig, err := solana.SignatureFromBase58(txHash)
	if err != nil {
		return nil, fmt.Errorf("solana: bad transaction signature %q: %w", txHash, err)
	}
	owner, err := parseAddress(to)
	if err != nil {
		return nil, err
	}
	ata, err := associatedTokenAddress(owner, l.mint)
	if err != nil {
		return nil, err
	}
	tx, err := getTransaction(ctx, l.rpc, sig, rpc.CommitmentConfirmed)
	if errors.Is(err, rpc.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := asScanTx(tx, sig)
	if err != nil {
		return nil, err
	}
	var out []chains.Deposit
	for _, c := range creditsIn(st, tx.Slot, l.mint.String()) {
		if c.owner.Equals(owner) && c.account.Equals(ata) {
			out = append(out, chains.Deposit{
				Chain:  chains.Solana,
				TxHash: c.sig.String(),
				Index:  uint(c.index),
				From:   c.from,
				To:     owner.String(),
				Amount: new(big.Int).SetUint64(c.amount),
				Block:  c.slot,
			})
		}
	}
	return out, nil
}

// asScanTx puts a getTransaction answer in the shape of a getBlock
// transaction with "accounts" details: account keys in the order token
// balances index them (static, then loaded writable, then loaded
// read-only), the error, the mint balances with their owners.
func asScanTx(tx *rpc.GetTransactionResult, sig solana.Signature) (*scanTx, error) {
	if tx == nil || tx.Meta == nil || tx.Transaction == nil {
		return &scanTx{}, nil
	}
	keys, err := accountKeys(tx)
	if err != nil {
		return nil, fmt.Errorf("solana: transaction %s: %w", sig, err)
	}
	out := &scanTx{}
	out.Transaction.Signatures = []string{sig.String()}
	for _, k := range keys {
		out.Transaction.AccountKeys = append(out.Transaction.AccountKeys, struct {
			Pubkey string `json:"pubkey"`
		}{Pubkey: k.String()})
	}
	meta := &struct {
		Err               json.RawMessage `json:"err"`
		PreTokenBalances  []scanBalance   `json:"preTokenBalances"`
		PostTokenBalances []scanBalance   `json:"postTokenBalances"`
	}{}
	if tx.Meta.Err != nil {
		meta.Err = json.RawMessage(`"failed"`)
	}
	convert := func(bs []rpc.TokenBalance) []scanBalance {
		out := make([]scanBalance, 0, len(bs))
		for _, b := range bs {
			sb := scanBalance{AccountIndex: int(b.AccountIndex), Mint: b.Mint.String()}
			if b.Owner != nil {
				sb.Owner = b.Owner.String()
			}
			if b.UiTokenAmount != nil {
				sb.UITokenAmount.Amount = b.UiTokenAmount.Amount
			}
			out = append(out, sb)
		}
		return out
	}
	meta.PreTokenBalances = convert(tx.Meta.PreTokenBalances)
	meta.PostTokenBalances = convert(tx.Meta.PostTokenBalances)
	out.Meta = meta
	return out, nil
}

var _ chains.DepositReader = (*Ledger)(nil)
