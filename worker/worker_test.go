package worker

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/chaincursor"
	"agentpay/internal/store"
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

// unfinishedScans counts the chain scans' jobs not finished (waiting or
// running).
func unfinishedScans(tb testing.TB, db *store.DB) int {
	tb.Helper()
	var n int
	require.NoError(tb, db.SQL.QueryRowContext(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'scan_chain' AND state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`).Scan(&n))
	return n
}

// runningScansAtScan notes, when the first scan has committed (Scanned is
// told after ScanDeposits returns, inside the job's run), how many scan
// jobs are still marked running.
type runningScansAtScan struct {
	noObserver
	db      *store.DB
	once    sync.Once
	running chan int
}

func (o *runningScansAtScan) Scanned(string, string, uint64, uint64, int) {
	o.once.Do(func() {
		var n int
		if err := o.db.SQL.QueryRowContext(context.Background(),
			`SELECT count(*) FROM river_job WHERE kind = 'scan_chain' AND state = 'running'`).Scan(&n); err != nil {
			n = -1
		}
		o.running <- n
	})
}

// TestScanJobCompletesWithItsScan: a scan's job is completed in the scan's
// own transaction, so once the scan has committed no scan of the chain is
// running any more, and the chain's next scan (unique while one runs) can
// be enqueued at once. Before, the job stayed running until River's
// completer recorded it, in batches, and a new head seen meanwhile waited.
func TestScanJobCompletesWithItsScan(t *testing.T) {
	h := newHarness(t, testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}}), agentpay.Config{})
	obs := &runningScansAtScan{db: h.db, running: make(chan int, 1)}
	h.startWorker(t, Config{Observer: obs, ScanInterval: time.Hour, HeadPollInterval: -1})
	select {
	case n := <-obs.running:
		require.Zero(t, n, "the scan's job is still running after its scan committed")
	case <-time.After(time.Minute):
		t.Fatal("no scan within a minute of the worker's start")
	}
}

// TestNewHeadIsEnqueuedWhenTheRunningScanEnds: a head seen while the
// chain's scan is running (here one of another worker process: a job row
// marked running) is not dropped, and not left to the next look at the
// head either: the watch tries the insert again on its own and the scan is
// enqueued once the running one has ended. Before, only the next look
// tried again.
func TestNewHeadIsEnqueuedWhenTheRunningScanEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}})
	h := newHarness(t, env, agentpay.Config{})
	db, chain := h.db, env.EVM(chains.Base)
	// No head watch of the worker's own: the test drives one.
	w, _ := h.runningWorker(t, Config{ScanInterval: time.Hour, HeadPollInterval: -1})
	cursor := func() int64 {
		c, err := db.Ent.ChainCursor.Query().
			Where(chaincursor.Chain("base"), chaincursor.ModeEQ(chaincursor.ModeTest)).Only(ctx)
		if err != nil {
			return -1
		}
		return c.NextBlock
	}
	require.Eventually(t, func() bool { return cursor() > 0 && unfinishedScans(t, db) == 0 }, 30*time.Second, 20*time.Millisecond,
		"the first scan is done")
	first := cursor()

	// Another process's scan, running.
	args := ScanChainArgs{Mode: string(agentpay.ModeTest), Chain: string(chains.Base)}
	running, err := w.Client().Insert(ctx, args, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.False(t, running.UniqueSkippedAsDuplicate)
	_, err = db.SQL.ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1 WHERE id = $1`, running.Job.ID)
	require.NoError(t, err)

	chain.Commit()
	looks := make(chan time.Time)
	inserts := make(chan *rivertype.JobInsertResult, 1)
	// The watch's second try waits for the other scan's end, however long
	// the test takes to end it: the watch's quick tries are bounded in
	// time (headRetryFor), and a slow machine must not outlast them.
	ended, tries := make(chan struct{}), 0
	go headWatch(ctx, looks, func(ctx context.Context) (uint64, error) {
		return h.svc.ChainHead(ctx, agentpay.ModeTest, chains.Base)
	}, func(ctx context.Context) (*rivertype.JobInsertResult, error) {
		if tries++; tries == 2 {
			select {
			case <-ended:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		res, err := w.Client().Insert(ctx, args, nil)
		if err == nil && tries == 1 {
			inserts <- res
		}
		return res, err
	})
	looks <- time.Now() // the only look
	res := <-inserts
	require.True(t, res.UniqueSkippedAsDuplicate, "the running scan refuses the new one")
	require.Equal(t, rivertype.JobStateRunning, res.Job.State)

	// The other process's scan ends (its job completed with it).
	finished := `UPDATE river_job SET state = 'completed', finalized_at = datetime('now', 'subsec') WHERE id = $1`
	if db.IsPostgres() {
		finished = `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`
	}
	_, err = db.SQL.ExecContext(ctx, finished, running.Job.ID)
	require.NoError(t, err)
	close(ended)
	require.Eventually(t, func() bool { return cursor() > first }, 20*time.Second, 20*time.Millisecond,
		"the block seen while the other scan ran is scanned, with no other look at the head")
}
