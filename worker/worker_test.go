package worker

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/chaincursor"
	"agentpay/internal/testenv"
)

// TestWorkerScansConfiguredChains runs the River client on the test
// database (SQLite or PostgreSQL) and checks the periodic scan job keeps the
// chain's cursor moving with the chain.
func TestWorkerScansConfiguredChains(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	h := newHarness(t, env, agentpay.Config{})
	db, chain := h.db, env.EVM(chains.Base)

	stop := h.startWorker(t, Config{ScanInterval: 100 * time.Millisecond})

	cursor := func() int64 {
		c, err := db.Ent.ChainCursor.Query().
			Where(chaincursor.Chain("base"), chaincursor.ModeEQ(chaincursor.ModeTest)).Only(ctx)
		if err != nil {
			return -1
		}
		return c.NextBlock
	}
	require.Eventually(t, func() bool { return cursor() > 0 }, 20*time.Second, 50*time.Millisecond, "the first scan saves a cursor")
	first := cursor()
	_, err := chain.Send(ctx, common.HexToAddress("0x000000000000000000000000000000000000dEaD"), big.NewInt(1))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cursor() > first+3 }, 20*time.Second, 50*time.Millisecond, "later scans follow the chain")

	stop()
}

// TestNewHeadIsScannedAtOnce: with the periodic scans an hour apart, a
// block sealed after the first scan is scanned within moments, because the
// worker watches each chain's head and enqueues the scan when it moves
// (headWatch), instead of leaving the block to the next tick.
func TestNewHeadIsScannedAtOnce(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}})
	h := newHarness(t, env, agentpay.Config{})
	db, chain := h.db, env.EVM(chains.Base)
	h.startWorker(t, Config{ScanInterval: time.Hour})

	cursor := func() int64 {
		c, err := db.Ent.ChainCursor.Query().
			Where(chaincursor.Chain("base"), chaincursor.ModeEQ(chaincursor.ModeTest)).Only(ctx)
		if err != nil {
			return -1
		}
		return c.NextBlock
	}
	require.Eventually(t, func() bool { return cursor() > 0 }, 20*time.Second, 20*time.Millisecond, "the first scan saves a cursor")
	// The first scan may still be finishing: let it, then seal blocks.
	time.Sleep(300 * time.Millisecond)
	first := cursor()
	for range 3 {
		chain.Commit()
	}
	require.Eventually(t, func() bool { return cursor() >= first+3 }, 10*time.Second, 20*time.Millisecond,
		"the new blocks are scanned without waiting for the next tick")
}
