package evm

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// geth answers a receipt asked while its indexer catches up with an error
// that must read as "pending", not as a failure of the chain.
func TestIndexingInProgress(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("transaction indexing is in progress"), true},
		{fmt.Errorf("rpc: %w", errors.New("transaction indexing is in progress")), true},
		{ethereum.NotFound, false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		require.Equal(t, tc.want, IndexingInProgress(tc.err), "%v", tc.err)
	}
}

// laggingHead is a client whose eth_blockNumber answers from a node some
// blocks behind the one that serves receipts, as behind a load balancer
// (and, for a moment, geth itself: receipts become readable just before
// their block is the head).
type laggingHead struct {
	Client
	lag atomic.Uint64
}

func (c *laggingHead) BlockNumber(ctx context.Context) (uint64, error) {
	n, err := c.Client.BlockNumber(ctx)
	return n - min(n, c.lag.Load()), err
}

// A receipt of a block the head has not reached reads as pending: balances
// read at the head would not show the transfer yet.
func TestReceiptPendingUntilTheHeadHasItsBlock(t *testing.T) {
	ctx := context.Background()
	c := startChain(t, chains.Base)
	client := &laggingHead{Client: c.Client()}
	cfg := c.config(false)
	cfg.Client = client
	l, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(l.Close)

	srcKey, _ := c.fundedKey(t, 2_000_000)
	_, dst := newKey(t)
	sub, err := l.Transfer(ctx, chains.TransferRequest{Key: srcKey, To: dst.Hex(), Amount: big.NewInt(1_000_000), Ref: randomRef(t)})
	require.NoError(t, err)
	client.lag.Store(1)
	c.Commit()
	rc, err := c.Client().TransactionReceipt(ctx, common.HexToHash(sub.TxHash))
	require.NoError(t, err, "the block holds the transfer")

	r, err := l.Receipt(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxPending, r.State, "the head is a block behind the receipt")

	client.lag.Store(0)
	r, err = l.Receipt(ctx, sub.TxHash)
	require.NoError(t, err)
	require.Equal(t, chains.TxIncluded, r.State)
	require.Equal(t, rc.BlockNumber.Uint64(), r.Block)
}
