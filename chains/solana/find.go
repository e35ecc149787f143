package solana

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
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

// FindTransfer looks up the transaction that carried the Transfer with this
// Ref, by its reference account, at the ledger's commitment (confirmed by
// default). A successful transaction wins over a failed one; a failed one is
// still reported (found) so the caller sees its error through Receipt
// rather than sending again blindly. from is checked as an address but not
// otherwise needed: the reference is unique to the transfer.
//
// found=false means no transaction with the reference is confirmed now. A
// transaction still in flight may land later, until its blockhash expires
// (about 150 blocks after it was built): only then is sending the Ref again
// safe.
func (l *Ledger) FindTransfer(ctx context.Context, from string, ref [32]byte) (string, bool, error) {
	if _, err := parseAddress(from); err != nil {
		return "", false, err
	}
	limit := 20
	sigs, err := l.rpc.GetSignaturesForAddressWithOpts(ctx, ReferenceKey(ref), &rpc.GetSignaturesForAddressOpts{
		Limit:      &limit,
		Commitment: l.commitment,
	})
	if err != nil {
		return "", false, fmt.Errorf("solana: getSignaturesForAddress: %w", err)
	}
	var failed string
	for _, s := range sigs {
		if s == nil {
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
