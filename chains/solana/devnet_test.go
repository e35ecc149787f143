package solana_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/gagliardetto/solana-go"
	"github.com/stretchr/testify/require"

	"agentpay/chains/devnet"
	agentsolana "agentpay/chains/solana"
)

// Short slots and a shallow finalized depth keep the tests fast while still
// walking every deposit through confirmed, deeper and finalized.
const (
	testSlotTime = 50 * time.Millisecond
	// Finality 1.6 s after a deposit: room for a loaded machine to poll
	// in between, which the watcher tests need.
	testFinalizedDepth = 32
)

type testChain struct {
	dn       *devnet.Solana
	treasury solana.PrivateKey
	ledger   *agentsolana.Ledger
}

// startChain runs a LiteSVM devnet whose only SOL holder besides the faucet
// is the treasury, and a ledger paying fees from it.
func startChain(t testing.TB) *testChain {
	return startChainWith(t, devnet.SolanaConfig{})
}

// startChainWith is startChain with the devnet's other settings (slot time,
// finalized depth, skipped slots) taken from cfg where set.
func startChainWith(t testing.TB, cfg devnet.SolanaConfig) *testChain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	treasury, err := solana.NewRandomPrivateKey()
	require.NoError(t, err)
	if cfg.SlotTime == 0 {
		cfg.SlotTime = testSlotTime
	}
	if cfg.FinalizedDepth == 0 {
		cfg.FinalizedDepth = testFinalizedDepth
	}
	cfg.Fund = []solana.PublicKey{treasury.PublicKey()}
	dn, err := devnet.StartSolana(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dn.Close() })

	ledger, err := agentsolana.New(ctx, agentsolana.Config{
		RPCURL:       dn.RPCURL,
		Mint:         dn.Mint.String(),
		Decimals:     6,
		FeePayer:     treasury,
		PollInterval: cfg.SlotTime,
	})
	require.NoError(t, err)
	return &testChain{dn: dn, treasury: treasury, ledger: ledger}
}

func newKey(t testing.TB) solana.PrivateKey {
	t.Helper()
	k, err := solana.NewRandomPrivateKey()
	require.NoError(t, err)
	return k
}

func mustPub(t testing.TB, s string) solana.PublicKey {
	t.Helper()
	pk, err := solana.PublicKeyFromBase58(s)
	require.NoError(t, err)
	return pk
}

// rpcCounter is a proxy in front of the devnet that counts JSON-RPC calls by
// method, to check how the watcher uses the node.
type rpcCounter struct {
	URL   string
	mu    sync.Mutex
	calls map[string]int
}

func newRPCCounter(t *testing.T, target string) *rpcCounter {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	c := &rpcCounter{calls: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			var one struct{ Method string }
			var many []struct{ Method string }
			c.mu.Lock()
			if json.Unmarshal(body, &one) == nil && one.Method != "" {
				c.calls[one.Method]++
			} else if json.Unmarshal(body, &many) == nil {
				for _, m := range many {
					c.calls[m.Method]++
				}
			}
			c.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// take returns the counts since the last take.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}
