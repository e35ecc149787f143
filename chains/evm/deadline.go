package evm

import (
	"context"
	"math/big"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// deadlineClient gives every call to the node its own deadline
// (Config.RPCTimeout), whatever the caller's context says: a node that
// accepts a request and never answers must not hold a caller (and what it
// holds, such as a database transaction or a job) for ever. A caller's
// shorter deadline still wins.
type deadlineClient struct {
	c       Client
	timeout time.Duration
}

var _ Client = deadlineClient{}

// withDeadline wraps c once.
func withDeadline(c Client, timeout time.Duration) Client {
	if d, ok := c.(deadlineClient); ok {
		c = d.c
	}
	return deadlineClient{c: c, timeout: timeout}
}

func (d deadlineClient) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

// boundCall bounds one call made on c's raw connection (blockAt, blocksAt)
// as deadlineClient bounds its methods.
func boundCall(ctx context.Context, c Client) (context.Context, context.CancelFunc) {
	if d, ok := c.(deadlineClient); ok {
		return d.bound(ctx)
	}
	return ctx, func() {}
}

// Client is the raw RPC connection of the wrapped client, nil when it has
// none; calls on it go through boundCall.
func (d deadlineClient) Client() *rpc.Client {
	if raw, ok := d.c.(rawRPC); ok {
		return raw.Client()
	}
	return nil
}

func (d deadlineClient) ChainID(ctx context.Context) (*big.Int, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.ChainID(ctx)
}

func (d deadlineClient) BlockNumber(ctx context.Context) (uint64, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.BlockNumber(ctx)
}

func (d deadlineClient) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.HeaderByNumber(ctx, number)
}

func (d deadlineClient) CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.CodeAt(ctx, account, blockNumber)
}

func (d deadlineClient) CallContract(ctx context.Context, msg ethereum.CallMsg, blockNumber *big.Int) ([]byte, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.CallContract(ctx, msg, blockNumber)
}

func (d deadlineClient) EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.EstimateGas(ctx, msg)
}

func (d deadlineClient) SuggestGasPrice(ctx context.Context) (*big.Int, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.SuggestGasPrice(ctx)
}

func (d deadlineClient) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.SuggestGasTipCap(ctx)
}

func (d deadlineClient) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.FilterLogs(ctx, q)
}

func (d deadlineClient) PendingNonceAt(ctx context.Context, account common.Address) (uint64, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.PendingNonceAt(ctx, account)
}

func (d deadlineClient) TransactionByHash(ctx context.Context, txHash common.Hash) (*types.Transaction, bool, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.TransactionByHash(ctx, txHash)
}

func (d deadlineClient) TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error) {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.TransactionReceipt(ctx, txHash)
}

func (d deadlineClient) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	ctx, cancel := d.bound(ctx)
	defer cancel()
	return d.c.SendTransaction(ctx, tx)
}
