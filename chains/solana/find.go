package solana

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"

	"agentpay/chains"
)

// referencePrefix separates the reference keys of agentpay from any other
// use of the same 32 bytes.
const referencePrefix = "agentpay/ref"

// ReferenceKey is the Solana Pay style reference account a Transfer with
// this Ref carries: sha256("agentpay/ref" || ref) read as a public key. No
// one holds its private key (it is a hash, not a key pair) and it needs no
// account on chain: nodes index every account key of a transaction, so
// getSignaturesForAddress(ReferenceKey(ref)) lists the transactions of ref.
func ReferenceKey(ref [32]byte) solana.PublicKey {
	h := sha256.New()
	h.Write([]byte(referencePrefix))
	h.Write(ref[:])
	var pk solana.PublicKey
	copy(pk[:], h.Sum(nil))
	return pk
}

// maxReferenceTransactions bounds the transactions carrying one reference
// that FindTransfer examines (one getTransaction each). A transfer's
// reference is carried by its own transaction and its resends; anyone may
// add more (the reference is a public key), and past this many FindTransfer
// answers an error (unknown) rather than "not found", so a flood of decoys
// can delay a lookup but never make a sent transfer look unsent.
const maxReferenceTransactions = 100

// FindTransfer looks up the transaction that carried the Transfer q
// describes, by its reference account, at the ledger's commitment
// (confirmed by default). The reference alone proves nothing: it is a
// public key any transaction may list. So a transaction counts only when one
// of its top-level instructions is the SPL token program's TransferChecked
// of exactly q.Amount of the ledger's mint (and decimals) from the
// associated token account of q.From to that of q.To, with q.From as the
// authority and a signer of the transaction (no one else can sign for it)
// and the reference among the instruction's accounts, as Transfer builds
// it. A successful transaction wins over a failed one; a failed one is still
// reported (found) so the caller sees its error through Receipt rather than
// sending again blindly.
//
// found=false means no such transaction is confirmed now. A transaction
// still in flight may land later, until its blockhash expires (about 150
// blocks after it was built): only then is sending the Ref again safe.
func (l *Ledger) FindTransfer(ctx context.Context, q chains.TransferQuery) (string, bool, error) {
	from, err := parseAddress(q.From)
	if err != nil {
		return "", false, err
	}
	to, err := parseAddress(q.To)
	if err != nil {
		return "", false, err
	}
	if q.Amount == nil || q.Amount.Sign() <= 0 || !q.Amount.IsUint64() {
		return "", false, nil // Transfer never sends such an amount
	}
	want, err := l.transferShape(from, to, q.Amount.Uint64(), ReferenceKey(q.Ref))
	if err != nil {
		return "", false, err
	}
	limit := maxReferenceTransactions + 1
	sigs, err := l.rpc.GetSignaturesForAddressWithOpts(ctx, want.reference, &rpc.GetSignaturesForAddressOpts{
		Limit:      &limit,
		Commitment: l.commitment,
	})
	if err != nil {
		return "", false, fmt.Errorf("solana: getSignaturesForAddress: %w", err)
	}
	if len(sigs) > maxReferenceTransactions {
		return "", false, fmt.Errorf("solana: more than %d transactions carry the reference of this transfer: not looked through", maxReferenceTransactions)
	}
	var failed string
	for _, s := range sigs {
		if s == nil {
			continue
		}
		tx, err := getTransaction(ctx, l.rpc, s.Signature, l.commitment)
		if err != nil {
			// Unread, it might be the transfer: unknown, not "not found".
			return "", false, err
		}
		if !want.carriedBy(tx) {
			continue
		}
		if s.Err == nil {
			return s.Signature.String(), true, nil
		}
		if failed == "" {
			failed = s.Signature.String()
		}
	}
	if failed != "" {
		return failed, true, nil
	}
	return "", false, nil
}

// transferShape is the TransferChecked a Transfer of this ledger sends.
type transferShape struct {
	owner, source, mint, destination, reference solana.PublicKey
	amount                                      uint64
	decimals                                    uint8
}

func (l *Ledger) transferShape(owner, to solana.PublicKey, amount uint64, reference solana.PublicKey) (transferShape, error) {
	src, err := associatedTokenAddress(owner, l.mint)
	if err != nil {
		return transferShape{}, err
	}
	dst, err := associatedTokenAddress(to, l.mint)
	if err != nil {
		return transferShape{}, err
	}
	return transferShape{owner: owner, source: src, mint: l.mint, destination: dst, reference: reference,
		amount: amount, decimals: uint8(l.decimals)}, nil
}

// tokenTransferChecked is the SPL token program's TransferChecked tag; its
// data is the tag, the amount (u64, little endian) and the decimals.
const tokenTransferChecked = 12

// carriedBy reports whether tx holds the transfer: a top-level
// TransferChecked of the shape's amount, mint and decimals from its source
// to its destination, authorised by its owner, who signed the transaction,
// with its reference among the instruction's accounts.
func (w transferShape) carriedBy(tx *rpc.GetTransactionResult) bool {
	if tx == nil || tx.Transaction == nil || tx.Meta == nil {
		return false
	}
	parsed, err := tx.Transaction.GetTransaction()
	if err != nil || parsed == nil || !parsed.Message.IsSigner(w.owner) {
		return false
	}
	keys, err := accountKeys(tx)
	if err != nil {
		return false
	}
	key := func(i uint16) (solana.PublicKey, bool) {
		if int(i) >= len(keys) {
			return solana.PublicKey{}, false
		}
		return keys[i], true
	}
	for _, ix := range parsed.Message.Instructions {
		prog, ok := key(ix.ProgramIDIndex)
		data := ix.Data
		if !ok || !prog.Equals(solana.TokenProgramID) || len(data) != 10 || data[0] != tokenTransferChecked || len(ix.Accounts) < 5 {
			continue
		}
		if binary.LittleEndian.Uint64(data[1:9]) != w.amount || data[9] != w.decimals {
			continue
		}
		accounts := make([]solana.PublicKey, len(ix.Accounts))
		for i, a := range ix.Accounts {
			if accounts[i], ok = key(a); !ok {
				break
			}
		}
		if !ok || !accounts[0].Equals(w.source) || !accounts[1].Equals(w.mint) || !accounts[2].Equals(w.destination) || !accounts[3].Equals(w.owner) {
			continue
		}
		for _, extra := range accounts[4:] {
			if extra.Equals(w.reference) {
				return true
			}
		}
	}
	return false
}
