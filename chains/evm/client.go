package evm

import (
	"context"
	"math/big"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// Client is the part of a node's JSON-RPC API the adapter uses. Both
// *ethclient.Client and the simulated backend's client (ethclient/simulated)
// satisfy it, so tests can run the adapter in-process or over HTTP.
type Client interface {
	ChainID(ctx context.Context) (*big.Int, error)
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	CodeAt(ctx context.Context, account common.Address, blockNumber *big.Int) ([]byte, error)
	CallContract(ctx context.Context, msg ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
	EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	SuggestGasPrice(ctx context.Context) (*big.Int, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	TransactionByHash(ctx context.Context, txHash common.Hash) (tx *types.Transaction, isPending bool, err error)
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
}

// rawRPC is implemented by *ethclient.Client (and, through embedding, by the
// simulated backend's client). It lets block hashes be read as the node
// reports them instead of recomputed from a decoded header: chains whose
// headers carry fields go-ethereum does not know would otherwise hash
// differently from the blockHash in their logs, and every deposit would look
// reorged.
type rawRPC interface {
	Client() *rpc.Client
}

// blockRef is a block's number and hash as the node reports them.
type blockRef struct {
	Number uint64
	Hash   common.Hash
}

// blockAt returns the block at number, or the latest block when number is
// nil. found is false when the node has no block at that height.
func blockAt(ctx context.Context, c Client, number *uint64) (ref blockRef, found bool, err error) {
	if raw, ok := c.(rawRPC); ok && raw.Client() != nil {
		ctx, cancel := boundCall(ctx, c)
		defer cancel()
		arg := "latest"
		if number != nil {
			arg = hexutil.EncodeUint64(*number)
		}
		var head *struct {
			Number hexutil.Uint64 `json:"number"`
			Hash   common.Hash    `json:"hash"`
		}
		if err := raw.Client().CallContext(ctx, &head, "eth_getBlockByNumber", arg, false); err != nil {
			return blockRef{}, false, err
		}
		if head == nil {
			return blockRef{}, false, nil
		}
		return blockRef{Number: uint64(head.Number), Hash: head.Hash}, true, nil
	}
	var n *big.Int
	if number != nil {
		n = new(big.Int).SetUint64(*number)
	}
	h, err := c.HeaderByNumber(ctx, n)
	if err == ethereum.NotFound {
		return blockRef{}, false, nil
	}
	if err != nil {
		return blockRef{}, false, err
	}
	return blockRef{Number: h.Number.Uint64(), Hash: h.Hash()}, true, nil
}

// blocksAt returns the canonical blocks at the given heights, in one batch
// request when the client allows it (one round trip however many deposits
// are pending). A height the node has no block for is left out.
func blocksAt(ctx context.Context, c Client, numbers []uint64) (map[uint64]blockRef, error) {
	out := make(map[uint64]blockRef, len(numbers))
	raw, ok := c.(rawRPC)
	if !ok || raw.Client() == nil || len(numbers) < 2 {
		for _, n := range numbers {
			r, found, err := blockAt(ctx, c, &n)
			if err != nil {
				return nil, err
			}
			if found {
				out[n] = r
			}
		}
		return out, nil
	}
	type head struct {
		Number hexutil.Uint64 `json:"number"`
		Hash   common.Hash    `json:"hash"`
	}
	results := make([]*head, len(numbers))
	batch := make([]rpc.BatchElem, len(numbers))
	for i, n := range numbers {
		batch[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.EncodeUint64(n), false}, Result: &results[i]}
	}
	callCtx, cancel := boundCall(ctx, c)
	defer cancel()
	if err := raw.Client().BatchCallContext(callCtx, batch); err != nil {
		return nil, err
	}
	for i, b := range batch {
		if b.Error != nil {
			return nil, b.Error
		}
		if results[i] != nil {
			out[numbers[i]] = blockRef{Number: uint64(results[i].Number), Hash: results[i].Hash}
		}
	}
	return out, nil
}
