package agentpay

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
	"agentpay/internal/testenv"
)

// TestReadyNamesAChainStartedWhileItsRPCWasDown: a service built while a
// chain's node fails every call (through a real loopback proxy answering
// 500) is built and answers, Ready reports that chain unreachable by name,
// and it becomes ready without a restart once the node answers.
func TestReadyNamesAChainStartedWhileItsRPCWasDown(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 20 * time.Millisecond})
	dn := env.EVM(chains.Base)
	target, err := url.Parse(dn.RPCURL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var down atomic.Bool
	down.Store(true)
	rpc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "upstream unavailable", http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rpc.Close)

	startCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	n, err := adapters.Network(startCtx, chains.Base, adapters.Chain{
		RPCURL: rpc.URL, USDC: dn.USDC.Hex(), Confirmations: 1, RPCTimeout: 2 * time.Second, StartInBackground: true,
	})
	require.NoError(t, err)
	svc := newTestService(t, env, Config{Test: chains.Networks{chains.Base: n}, HeadCacheTTL: 10 * time.Millisecond})

	err = svc.Ready(ctx)
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorContains(t, err, "base")

	down.Store(false)
	require.Eventually(t, func() bool { return svc.Ready(ctx) == nil }, 10*time.Second, 50*time.Millisecond)
}
