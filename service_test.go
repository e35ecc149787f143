package agentpay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/chains/chainstest"
	"agentpay/internal/testenv"
)

// TestChainHeadsComeFromTheCache: what shows chain heads (ChainStatuses for
// the chains query, ChainStatus, chainHead watches, Ready) costs the node at
// most one head read per HeadCacheTTL of the service's clock however many
// ask, and none while the process's own scans keep the head fresh.
func TestChainHeadsComeFromTheCache(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 20 * time.Millisecond, Clock: time.Now()})
	n := env.Test[chains.Base]
	heads := chainstest.CountHeads(n.Ledger)
	n.Ledger = heads
	const ttl = 300 * time.Millisecond
	svc := newTestService(t, env, Config{Test: chains.Networks{chains.Base: n}, HeadCacheTTL: ttl})

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(3)
		go func() { defer wg.Done(); require.True(t, svc.ChainStatuses(ctx)[0].Healthy) }()
		go func() {
			defer wg.Done()
			st, err := svc.ChainStatus(ctx, ModeTest, chains.Base)
			require.NoError(t, err)
			require.Positive(t, st.Head)
		}()
		go func() { defer wg.Done(); require.NoError(t, svc.Ready(ctx)) }()
	}
	wg.Wait()
	require.Equal(t, int64(1), heads.Calls(), "150 readers within a TTL, one read")

	// Twenty watchers looking every 5 ms for half a second: nothing while
	// the head is fresh, one read for them all once it is a TTL old.
	before := heads.Calls()
	watchCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	for range 20 {
		ch, err := svc.WatchChainHead(watchCtx, ModeTest, chains.Base, 5*time.Millisecond)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ch {
			}
		}()
	}
	require.Equal(t, before, heads.Calls(), "fresh: no read")
	env.Clock.Advance(ttl)
	require.Eventually(t, func() bool { return heads.Calls() == before+1 }, 5*time.Second, time.Millisecond)
	wg.Wait()
	require.Equal(t, before+1, heads.Calls(), "20 watchers, one read per TTL")

	// A scan feeds the cache: readers right after it cost nothing.
	env.Clock.Advance(ttl)
	_, err := svc.ScanDeposits(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	before = heads.Calls()
	for range 20 {
		require.True(t, svc.ChainStatuses(ctx)[0].Healthy)
	}
	require.Equal(t, before, heads.Calls(), "the scan's head is shown")
}
