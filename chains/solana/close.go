package solana

import (
	"context"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
)

// CloseEmptyTokenAccount closes the USDC associated token account of key's
// owner once a sweep has emptied it, so its rent (2,039,280 lamports) goes
// back to the fee payer (the treasury), which also pays the fee; the owner
// signs as the account's close authority. An account that still holds
// tokens is left alone (closed false); one that does not exist (closed
// before, or never created) is done. The answer waits for the close's
// inclusion, bounded by ctx.
func (l *Ledger) CloseEmptyTokenAccount(ctx context.Context, key []byte) (chains.Closed, error) {
	src, err := privateKey(key)
	if err != nil {
		return chains.Closed{}, fmt.Errorf("solana: owner key: %w", err)
	}
	owner := src.PublicKey()
	ata, err := associatedTokenAddress(owner, l.mint)
	if err != nil {
		return chains.Closed{}, err
	}
	res, err := l.rpc.GetAccountInfoWithOpts(ctx, ata, &rpc.GetAccountInfoOpts{
		Encoding:   solana.EncodingBase64,
		Commitment: l.commitment,
	})
	if errors.Is(err, rpc.ErrNotFound) || (err == nil && (res == nil || res.Value == nil)) {
		return chains.Closed{Done: true}, nil
	}
	if err != nil {
		return chains.Closed{}, fmt.Errorf("solana: read token account %s: %w", ata, err)
	}
	acc, ok := decodeTokenAccount(res.Value)
	if !ok || !acc.Mint.Equals(l.mint) || !acc.Owner.Equals(owner) || acc.Amount != 0 {
		return chains.Closed{}, nil // not ours to close, or not empty
	}
	feePayer := l.feePayer.PublicKey()
	closeIx, err := token.NewCloseAccountInstruction(ata, feePayer, owner, nil).ValidateAndBuild()
	if err != nil {
		return chains.Closed{}, fmt.Errorf("solana: build CloseAccount: %w", err)
	}
	bh, err := l.rpc.GetLatestBlockhash(ctx, l.commitment)
	if err != nil {
		return chains.Closed{}, fmt.Errorf("solana: get latest blockhash: %w", err)
	}
	if bh == nil || bh.Value == nil {
		return chains.Closed{}, errors.New("solana: get latest blockhash: empty result")
	}
	tx, err := solana.NewTransaction([]solana.Instruction{closeIx}, bh.Value.Blockhash, solana.TransactionPayer(feePayer))
	if err != nil {
		return chains.Closed{}, fmt.Errorf("solana: build transaction: %w", err)
	}
	if _, err := tx.Sign(func(pk solana.PublicKey) *solana.PrivateKey {
		switch {
		case pk.Equals(feePayer):
			return &l.feePayer
		case pk.Equals(owner):
			return &src
		}
		return nil
	}); err != nil {
		return chains.Closed{}, fmt.Errorf("solana: sign transaction: %w", err)
	}
	sig := tx.Signatures[0]
	l.sent.add(sig, bh.Value.LastValidBlockHeight)
	if _, err := l.rpc.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{PreflightCommitment: l.commitment}); err != nil {
		// Refused or unknown: closing is idempotent, the next sweep of the
		// address tries again.
		return chains.Closed{}, fmt.Errorf("solana: send close of %s: %w", ata, err)
	}
	r, err := l.Wait(ctx, sig.String())
	if err != nil {
		return chains.Closed{TxHash: sig.String()}, err
	}
	if r.State != chains.TxIncluded {
		return chains.Closed{TxHash: sig.String()}, fmt.Errorf("solana: close of %s: %s", ata, r.Err)
	}
	return chains.Closed{TxHash: sig.String(), Done: true}, nil
}
