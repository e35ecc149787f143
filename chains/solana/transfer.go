package solana

import (
	"context"
	"errors"
	"fmt"

	"github.com/gagliardetto/solana-go"
	computebudget "github.com/gagliardetto/solana-go/programs/compute-budget"
	"github.com/gagliardetto/solana-go/programs/token"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
)

// Instruction positions in a transfer transaction; preflight errors name
// the failing instruction by index.
const (
	ixCreateATA = iota
	ixTransfer
)

// Transfer moves req.Amount base units from the ATA of req.Key's owner to
// the ATA of req.To. The source signs as token-account owner and the
// treasury signs as fee payer; the recipient's ATA is created (treasury pays
// the rent) when it does not exist yet. It returns once the node accepted
// the transaction after a successful preflight.
//
// When sending fails in a way that leaves it unknown whether the node got
// the transaction (a timeout, a dropped connection), the returned Submitted
// still carries the signature, so the caller can ask Receipt later instead
// of sending twice. A transaction refused by preflight is never sent.
//
// A non-zero req.Ref travels as a Solana Pay style reference: ReferenceKey(req.Ref) is
// a read-only account of the TransferChecked instruction (the token program
// ignores it), so FindTransfer can find the transaction by the reference
// alone (getSignaturesForAddress) after the caller lost its signature. A
// Solana transaction is made unique by its recent blockhash and expires
// with it, and the chain does not refuse a Ref seen before: a Ref this
// ledger sent that is still pending or included answers that transaction
// again; one sent elsewhere (or before a restart) is sent again only once
// FindTransfer says nothing landed and the earlier blockhash can no longer
// be valid.
func (l *Ledger) Transfer(ctx context.Context, req chains.TransferRequest) (chains.Submitted, error) {
	src, err := privateKey(req.Key)
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("solana: source key: %w", err)
	}
	to, err := parseAddress(req.To)
	if err != nil {
		return chains.Submitted{}, chains.Mark(err, chains.ErrRefused)
	}
	if req.Amount == nil || req.Amount.Sign() <= 0 {
		return chains.Submitted{}, chains.Mark(errors.New("solana: transfer amount must be positive"), chains.ErrRefused)
	}
	if !req.Amount.IsUint64() {
		return chains.Submitted{}, chains.Mark(fmt.Errorf("solana: transfer amount %s exceeds u64", req.Amount), chains.ErrRefused)
	}
	owner := src.PublicKey()

	var reference *solana.PublicKey
	if req.Ref != ([32]byte{}) {
		k := ReferenceKey(req.Ref)
		reference = &k
		release := l.byRef.Lock(owner, req.Ref)
		defer release()
		// Unsure whether an earlier send lives (err), sending again could
		// move the funds twice: the caller retries. A failed or expired one
		// moved nothing: it is sent anew.
		if sub, alive, err := l.byRef.Alive(ctx, owner, req.Ref, l.Receipt); err != nil || alive {
			return sub, err
		}
	}
	instructions, err := l.transferInstructions(owner, to, req.Amount.Uint64(), reference)
	if err != nil {
		return chains.Submitted{}, err
	}
	bh, err := l.rpc.GetLatestBlockhash(ctx, l.commitment)
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("solana: get latest blockhash: %w", err)
	}
	if bh == nil || bh.Value == nil {
		return chains.Submitted{}, errors.New("solana: get latest blockhash: empty result")
	}
	tx, err := solana.NewTransaction(instructions, bh.Value.Blockhash, solana.TransactionPayer(l.feePayer.PublicKey()))
	if err != nil {
		return chains.Submitted{}, fmt.Errorf("solana: build transaction: %w", err)
	}
	feePayer := l.feePayer.PublicKey()
	if _, err := tx.Sign(func(pk solana.PublicKey) *solana.PrivateKey {
		switch {
		case pk.Equals(feePayer):
			return &l.feePayer
		case pk.Equals(owner):
			return &src
		}
		return nil
	}); err != nil {
		return chains.Submitted{}, fmt.Errorf("solana: sign transaction: %w", err)
	}
	sig := tx.Signatures[0]
	out := chains.Submitted{TxHash: sig.String(), From: owner.String()}

	// Remember the blockhash's expiry before sending: from here on the
	// transaction may exist, and Receipt needs to know when it no longer can.
	l.sent.add(sig, bh.Value.LastValidBlockHeight)
	_, err = l.rpc.SendTransactionWithOpts(ctx, tx, rpc.TransactionOpts{
		SkipPreflight:       false,
		PreflightCommitment: l.commitment,
	})
	if err != nil {
		if sendErr := asSendError(err, ixTransfer); sendErr != nil {
			// The node refused it: it was not broadcast.
			l.sent.remove(sig)
			return chains.Submitted{}, sendErr
		}
		err = fmt.Errorf("solana: send transaction %s: %w", sig, err)
	}
	if reference != nil {
		// Also when the outcome is unknown: the transaction may land.
		l.byRef.Put(owner, req.Ref, out)
	}
	return out, err
}

// transferInstructions builds the optional compute-budget instructions, the
// idempotent ATA create and the TransferChecked carrying the reference.
func (l *Ledger) transferInstructions(owner, to solana.PublicKey, amount uint64, reference *solana.PublicKey) ([]solana.Instruction, error) {
	srcATA, err := associatedTokenAddress(owner, l.mint)
	if err != nil {
		return nil, err
	}
	dstATA, err := associatedTokenAddress(to, l.mint)
	if err != nil {
		return nil, err
	}
	feePayer := l.feePayer.PublicKey()

	// solana-go has no CreateIdempotent builder; the ATA program's
	// instruction 1 is it. It succeeds without effect when the account
	// already exists, so no read-then-create race.
	createATA := solana.NewInstruction(
		solana.SPLAssociatedTokenAccountProgramID,
		solana.AccountMetaSlice{
			solana.Meta(feePayer).WRITE().SIGNER(),
			solana.Meta(dstATA).WRITE(),
			solana.Meta(to),
			solana.Meta(l.mint),
			solana.Meta(solana.SystemProgramID),
			solana.Meta(solana.TokenProgramID),
		},
		[]byte{1},
	)
	transfer, err := token.NewTransferCheckedInstruction(
		amount, uint8(l.decimals), srcATA, l.mint, dstATA, owner, nil,
	).ValidateAndBuild()
	if err != nil {
		return nil, fmt.Errorf("solana: build TransferChecked: %w", err)
	}
	instructions := []solana.Instruction{createATA, transfer}
	if reference != nil {
		data, err := transfer.Data()
		if err != nil {
			return nil, fmt.Errorf("solana: encode TransferChecked: %w", err)
		}
		// The reference goes after the authority, where a multisig's
		// signers would be; for a single-key owner the token program
		// ignores it.
		accounts := append(solana.AccountMetaSlice{}, transfer.Accounts()...)
		instructions[ixTransfer] = solana.NewInstruction(solana.TokenProgramID,
			append(accounts, solana.Meta(*reference)), data)
	}
	if l.priorityFee > 0 {
		limit, err := computebudget.NewSetComputeUnitLimitInstruction(l.unitLimit).ValidateAndBuild()
		if err != nil {
			return nil, fmt.Errorf("solana: build compute unit limit: %w", err)
		}
		price, err := computebudget.NewSetComputeUnitPriceInstruction(l.priorityFee).ValidateAndBuild()
		if err != nil {
			return nil, fmt.Errorf("solana: build compute unit price: %w", err)
		}
		// Appended after the transfer so the instruction indexes of the
		// create and the transfer stay fixed for error mapping.
		instructions = append(instructions, limit, price)
	}
	return instructions, nil
}
