package solana_test

import (
	"context"
	"crypto/rand"
	"math/big"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	agentsolana "agentpay/chains/solana"
)

func randomRef(t *testing.T) [32]byte {
	t.Helper()
	var r [32]byte
	_, err := rand.Read(r[:])
	require.NoError(t, err)
	return r
}

// A transfer carries its Ref as a reference account, read-only and not a
// signer, so it can be found by the Ref alone (as after a crash that lost the
// signature: TestConformance), while the token program moves the funds
// exactly as without it.
func TestFindTransferByReference(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := tc.ledger

	agent := newKey(t)
	recipient := newKey(t).PublicKey()
	_, err := tc.dn.Send(ctx, agent.PublicKey(), 3_000_000)
	require.NoError(t, err)

	ref := randomRef(t)
	sub, err := l.Transfer(ctx, chains.TransferRequest{Key: agent, To: recipient.String(), Amount: big.NewInt(1_000_000), Ref: ref})
	require.NoError(t, err)
	rcpt, err := l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, rcpt.State, rcpt.Err)
	requireBalance(t, l, recipient, 1_000_000)
	requireBalance(t, l, agent.PublicKey(), 2_000_000)

	// The reference is a read-only, non-signing key of the transaction.
	client := rpc.New(tc.dn.RPCURL)
	maxVersion := uint64(0)
	txr, err := client.GetTransaction(ctx, solana.MustSignatureFromBase58(sub.TxHash), &rpc.GetTransactionOpts{
		Commitment: rpc.CommitmentConfirmed, MaxSupportedTransactionVersion: &maxVersion,
	})
	require.NoError(t, err)
	tx, err := txr.Transaction.GetTransaction()
	require.NoError(t, err)
	refKey := agentsolana.ReferenceKey(ref)
	idx := -1
	for i, k := range tx.Message.AccountKeys {
		if k.Equals(refKey) {
			idx = i
		}
	}
	require.NotEqual(t, -1, idx, "the reference is an account key")
	w, err := tx.Message.IsWritable(refKey)
	require.NoError(t, err)
	require.False(t, w)
	require.False(t, tx.Message.IsSigner(refKey))
	require.NotEqual(t, agentsolana.ReferenceKey(ref), agentsolana.ReferenceKey(randomRef(t)))
}
