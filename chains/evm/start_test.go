package evm

import (
	"context"
	"errors"
	"math/big"
	"sync/atomic"
	"testing"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// failingClient fails its first `fail` calls of the reads New makes (chain
// id, code, contract calls), as a node behind a flaky proxy does, then
// answers from the real client.
type failingClient struct {
	Client
	fail  int64
	calls atomic.Int64
}

var errFlaky = errors.New("502 bad gateway")

func (c *failingClient) failing() bool { return c.calls.Add(1) <= c.fail }

func (c *failingClient) ChainID(ctx context.Context) (*big.Int, error) {
	if c.failing() {
		return nil, errFlaky
	}
	return c.Client.ChainID(ctx)
}

func (c *failingClient) CodeAt(ctx context.Context, a common.Address, n *big.Int) ([]byte, error) {
	if c.failing() {
		return nil, errFlaky
	}
	return c.Client.CodeAt(ctx, a, n)
}

func (c *failingClient) CallContract(ctx context.Context, msg ethereum.CallMsg, n *big.Int) ([]byte, error) {
	if c.failing() {
		return nil, errFlaky
	}
	return c.Client.CallContract(ctx, msg, n)
}

// TestNewRetriesFailedStartReads: New's checks ask again when a read
// fails (chain id, token code, the token's domain), so a node that fails a
// few calls does not stop the process that is starting; a wrong answer
// (another chain) stops it at once; a node that keeps failing stops it
// once StartPatience has passed.
func TestNewRetriesFailedStartReads(t *testing.T) {
	t.Parallel()
	chain := startChain(t, chains.Base)
	ctx := context.Background()

	for _, fail := range []int64{1, 2, 5} {
		c := &failingClient{Client: chain.Client(), fail: fail}
		cfg := chain.config(false)
		cfg.Client = c
		l, err := New(ctx, cfg)
		require.NoError(t, err, "the node failed the first %d calls", fail)
		require.Equal(t, chain.ChainID, l.ChainID())
		require.Greater(t, c.calls.Load(), fail)
	}

	wrong := &failingClient{Client: chain.Client()}
	cfg := chain.config(false)
	cfg.Client, cfg.ChainID = wrong, chain.ChainID+1
	_, err := New(ctx, cfg)
	require.ErrorContains(t, err, "config says")
	require.EqualValues(t, 1, wrong.calls.Load(), "a wrong chain id is not asked again")

	down := &failingClient{Client: chain.Client(), fail: 1 << 40}
	cfg = chain.config(false)
	cfg.Client, cfg.StartPatience = down, 500*time.Millisecond
	_, err = New(ctx, cfg)
	require.ErrorIs(t, err, errFlaky)
	require.Greater(t, down.calls.Load(), int64(1), "asked again before giving up")
}
