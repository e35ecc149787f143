package adapters_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/adapters"
	"agentpay/chains/devnet"
)

// switchableRPC is a loopback HTTP proxy to a node that answers every call
// 500 while down is set, as a provider's proxy does in an outage.
func switchableRPC(t *testing.T, target string) (*httptest.Server, *atomic.Bool) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "upstream unavailable", http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &down
}

// TestNetworkStartsInBackgroundWhenRPCIsDown: a process started while its
// chain's node fails every call gets the chain at once, not ready (every
// read answers ErrChainStarting, so the readiness probe reports it), and
// the chain becomes ready by itself once the node answers again. Without
// StartInBackground the same start fails, which is what stopped processes
// under churn.
func TestNetworkStartsInBackgroundWhenRPCIsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dn, err := devnet.StartEVM(ctx, devnet.EVMConfig{Chain: chains.Base})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dn.Close() })
	rpc, down := switchableRPC(t, dn.RPCURL)
	down.Store(true)

	c := adapters.Chain{RPCURL: rpc.URL, USDC: dn.USDC.Hex(), Confirmations: 1, StartPatience: time.Millisecond, RPCTimeout: 2 * time.Second}
	_, err = adapters.Network(ctx, chains.Base, c)
	require.Error(t, err, "a foreground start fails on a node that is down")

	c.StartInBackground = true
	n, err := adapters.Network(ctx, chains.Base, c)
	require.NoError(t, err)
	require.Equal(t, dn.USDC.Hex(), n.Ledger.Token())
	_, err = n.Ledger.Head(ctx)
	require.ErrorIs(t, err, adapters.ErrChainStarting)
	_, err = n.NewWatcher(ctx, chains.WatcherState{})
	require.ErrorIs(t, err, adapters.ErrChainStarting)
	_, err = n.Ledger.Transfer(ctx, chains.TransferRequest{})
	require.ErrorIs(t, err, chains.ErrRefused, "nothing is sent before the start")
	_, relays := n.Ledger.(chains.AuthorizationRelayer)
	require.True(t, relays, "the chain offers what it will offer once started")

	down.Store(false)
	require.Eventually(t, func() bool {
		h, err := n.Ledger.Head(ctx)
		return err == nil && h > 0
	}, 10*time.Second, 50*time.Millisecond)
	id, ok := n.Ledger.(interface{ ChainID() uint64 })
	require.True(t, ok)
	require.Equal(t, dn.ChainID, id.ChainID())
	_, err = n.NewWatcher(ctx, chains.WatcherState{})
	require.NoError(t, err)
}

// TestNetworkBackgroundStartStillRefusesWrongChain: a node that answers,
// wrongly (no token at the configured address), is a misconfiguration, and
// the start fails at once even in the background mode.
func TestNetworkBackgroundStartStillRefusesWrongChain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dn, err := devnet.StartEVM(ctx, devnet.EVMConfig{Chain: chains.Base})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dn.Close() })
	_, err = adapters.Network(ctx, chains.Base, adapters.Chain{
		RPCURL: dn.RPCURL, USDC: "0x000000000000000000000000000000000000dEaD", Confirmations: 1, StartInBackground: true,
	})
	require.ErrorContains(t, err, "no contract at USDC address")
}
