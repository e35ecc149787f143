package solana_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/gagliardetto/solana-go/rpc"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// TestCloseEmptyTokenAccount: a deposit account's token account is left
// while it holds USDC; once swept it is closed, its rent back with the
// treasury (less the fee it paid); closing again is done without a
// transaction.
func TestCloseEmptyTokenAccount(t *testing.T) {
	tc := startChain(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := tc.ledger
	client := rpc.New(tc.dn.RPCURL)
	var closer chains.TokenAccountCloser = l

	deposit := newKey(t)
	_, err := tc.dn.Send(ctx, deposit.PublicKey(), 2_000_000)
	require.NoError(t, err)
	requireBalance(t, l, deposit.PublicKey(), 2_000_000)

	got, err := closer.CloseEmptyTokenAccount(ctx, deposit)
	require.NoError(t, err)
	require.Equal(t, chains.Closed{}, got, "holds USDC: left alone")

	sub, err := l.Transfer(ctx, chains.TransferRequest{Key: deposit, To: tc.treasury.PublicKey().String(), Amount: big.NewInt(2_000_000)})
	require.NoError(t, err)
	r, err := l.Wait(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, r.State, r.Err)
	before, err := client.GetBalance(ctx, tc.treasury.PublicKey(), rpc.CommitmentConfirmed)
	require.NoError(t, err)

	ata, _, err := solana.FindAssociatedTokenAddress(deposit.PublicKey(), tc.dn.Mint)
	require.NoError(t, err)
	got, err = closer.CloseEmptyTokenAccount(ctx, deposit)
	require.NoError(t, err)
	require.True(t, got.Done)
	require.NotEmpty(t, got.TxHash)
	after, err := client.GetBalance(ctx, tc.treasury.PublicKey(), rpc.CommitmentConfirmed)
	require.NoError(t, err)
	const rent = 2_039_280
	gain := int64(after.Value) - int64(before.Value)
	require.LessOrEqual(t, gain, int64(rent), "the rent, less the fee")
	require.Greater(t, gain, int64(rent-50_000), "the rent, less the fee")
	_, err = client.GetAccountInfoWithOpts(ctx, ata, &rpc.GetAccountInfoOpts{Commitment: rpc.CommitmentConfirmed})
	require.ErrorIs(t, err, rpc.ErrNotFound, "closed")

	got, err = closer.CloseEmptyTokenAccount(ctx, deposit)
	require.NoError(t, err)
	require.Equal(t, chains.Closed{Done: true}, got, "already closed")
}
