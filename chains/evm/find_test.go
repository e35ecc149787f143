package evm

import (
	"context"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// FindTransfer answers "did the Transfer with this Ref land?" from the
// token's AuthorizationUsed logs: not while pooled, the relay's hash once
// included (blocks on top), and nothing for the same nonce of another
// authorizer. (What every adapter does: TestConformance.)
func TestFindTransfer(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	l := c.ledger(t, false)
	srcKey, src := c.fundedKey(t, 5_000_000)
	_, dst := newKey(t)

	req := chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(1_000_000), Ref: randomRef(t)}
	q := chains.TransferQuery{From: src.Hex(), To: req.To, Amount: req.Amount, Ref: req.Ref}
	_, found, err := l.FindTransfer(ctx, q)
	require.NoError(t, err)
	require.False(t, found, "nothing sent yet")

	sub, err := l.Transfer(ctx, req)
	require.NoError(t, err)
	_, found, err = l.FindTransfer(ctx, q)
	require.NoError(t, err)
	require.False(t, found, "pooled but not included")

	c.include(t, l, sub.TxHash)
	// A few more blocks on top: the search still finds it, newest first.
	for i := 0; i < 3; i++ {
		c.Commit()
	}
	// Another ledger (as after a restart) finds the same transaction.
	fresh := c.ledger(t, false)
	hash, found, err := fresh.FindTransfer(ctx, q)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, sub.TxHash, hash)

	// The same Ref from another authorizer is another authorization.
	_, other := newKey(t)
	otherQ := q
	otherQ.From = other.Hex()
	_, found, err = fresh.FindTransfer(ctx, otherQ)
	require.NoError(t, err)
	require.False(t, found)
}
