// Package worker runs the service's background jobs on River: the jobs are
// the workers and periodic jobs New registers (its river.AddWorker calls
// and its periodic list, each job in the file of its concept: scan.go,
// webhooks.go, mail.go, settle.go, cards.go, spendapprovals.go, prune.go...), the deposit scan
// of each configured chain among them; and, on PostgreSQL, it frees the
// jobs of worker processes that died (liveness.go).
// Jobs call the service layer; the rules stay there.
package worker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/jobs"
	"agentpay/internal/store"
)

// Config wires the worker.
type Config struct {
	DB      *store.DB
	Service *agentpay.Service
	Logger  *slog.Logger
	// ScanInterval is how often each chain is scanned for deposits
	// (default DefaultScanInterval). A deposit is seen, and a payment
	// confirmed, at the first scan after its block: this is most of the
	// time from a block to its webhook.
	ScanInterval time.Duration
	// HeadPollInterval is how often each scanned chain's head is read
	// (one eth_blockNumber or getSlot call): a head that moved enqueues
	// the chain's scan at once, so a block is scanned within this of its
	// sealing, not of the next ScanInterval tick (default
	// DefaultHeadPollInterval; negative: off, scans on the ticks only).
	HeadPollInterval time.Duration
	// FetchPollInterval is how often each queue looks for jobs it was not
	// told about, and FetchCooldown the least time between two fetches of
	// a queue (defaults: DefaultFetchPollInterval, DefaultFetchCooldown).
	// Without LISTEN/NOTIFY (lib/pq, SQLite) polling is what picks up the
	// periodic scans, and on PostgreSQL the webhook jobs a scan commits (the
	// inserting client's own wake-up comes before the commit, so it finds
	// nothing); both wait up to one poll.
	FetchPollInterval time.Duration
	FetchCooldown     time.Duration
	// Concurrency is the number of jobs of each queue run at once.
	Concurrency int
	// WebhookConcurrency is the number of webhook deliveries in flight at
	// once (default 200): they mostly wait on receivers. It must be more
	// than what slow receivers together (Service.WebhookSlowConcurrency)
	// and one merchant (Service.WebhookWorkersPerMerchant) may hold of
	// them, so receivers that answer always have workers.
	WebhookConcurrency int
	// Observer is told of every job run, the queues' depth, each chain
	// scan and webhook try (metrics); nil: no one.
	Observer Observer
	// QueueSampleInterval is how often the queues' depth is counted for
	// the Observer (default QueueSampleInterval).
	QueueSampleInterval time.Duration
}

// Worker is a River client working the service's queues.
type Worker struct {
	client *river.Client[*sql.Tx]
	db     *sql.DB
	obs    Observer
	// sampleEvery is Config.QueueSampleInterval; 0: no Observer, no
	// sampling.
	sampleEvery time.Duration
	logger      *slog.Logger
	// live finds dead worker processes on PostgreSQL (see liveness.go);
	// nil on SQLite, where the one process runs everything.
	live *liveness
	// scans are the deposit scans scanTicker enqueues every scanEvery.
	scans     []ScanChainArgs
	scanEvery time.Duration
	// headEvery is Config.HeadPollInterval (0: off).
	headEvery time.Duration
	svc       *agentpay.Service
}

const queueChains = "chains"

// workedQueues are the queues a worker works (Config's river.QueueConfig).
var workedQueues = []string{river.QueueDefault, queueChains, jobs.WebhookQueue, jobs.SettlementQueue, jobs.MailQueue}

// jobTimeout bounds every job run.
const jobTimeout = time.Minute

// The defaults of Config: together they keep a payment's payment.confirmed
// webhook within a few hundred milliseconds of the block that completes its
// confirmations (BenchmarkConfirmedWebhookLatency): at most a head poll
// until the scan is enqueued (a scan interval when the head cannot be read),
// the scan job's pickup, a poll until the webhook job runs.
// A scan of a chain with no new block is two cheap RPC calls; a poll is one
// indexed query per queue.
const (
	DefaultScanInterval = 500 * time.Millisecond
	// DefaultHeadPollInterval: a new block is scanned within about this
	// of its sealing (headWatch); the ScanInterval ticks remain the floor
	// when the head cannot be read. Ten cheap calls a second per chain.
	DefaultHeadPollInterval  = 100 * time.Millisecond
	DefaultFetchPollInterval = 100 * time.Millisecond
	DefaultFetchCooldown     = 20 * time.Millisecond
	// webhookFetchPollInterval is the webhook queue's poll: a delivery
	// snoozed at its merchant's cap comes back at its turn
	// (agentpay.Service.WebhookBusyWait, often a few milliseconds ahead),
	// and River fetches it at its next poll unless a fetch of a full batch
	// is pending; at 100 ms a merchant whose receiver answers at once got
	// at most its waiting deliveries a poll.
	webhookFetchPollInterval = 20 * time.Millisecond
	// headRetry is how soon headWatch tries again to enqueue a scan for a
	// new head while the chain's scan is running (a scan takes 5-35 ms):
	// the new head is scanned within about this of that scan's commit.
	headRetry = 10 * time.Millisecond
	// headRetryFor bounds those quick retries behind one scan: longer than
	// a scan takes (5-35 ms, more under load); past it, the next looks try.
	headRetryFor = 250 * time.Millisecond
)

// New builds the River client with every job kind and the periodic scans of
// each configured chain. With several worker processes River elects one
// leader to schedule periodic jobs, and unique jobs keep one scan of a chain
// at a time.
func New(cfg Config) (*Worker, error) {
	if cfg.DB == nil || cfg.Service == nil {
		return nil, errors.New("worker: Config.DB and Config.Service are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = DefaultScanInterval
	}
	switch {
	case cfg.HeadPollInterval == 0:
		cfg.HeadPollInterval = DefaultHeadPollInterval
	case cfg.HeadPollInterval < 0:
		cfg.HeadPollInterval = 0
	}
	if cfg.FetchPollInterval <= 0 {
		cfg.FetchPollInterval = DefaultFetchPollInterval
	}
	if cfg.FetchCooldown <= 0 {
		cfg.FetchCooldown = min(DefaultFetchCooldown, cfg.FetchPollInterval)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.WebhookConcurrency <= 0 {
		cfg.WebhookConcurrency = 200
	}
	if most, slow := cfg.Service.WebhookWorkersPerMerchant(), cfg.Service.WebhookSlowConcurrency(); cfg.WebhookConcurrency <= most+slow {
		return nil, fmt.Errorf("worker: %d webhook workers, but one merchant may hold %d of them (twice WEBHOOK_MERCHANT_CONCURRENCY) and slow receivers %d more (WEBHOOK_SLOW_CONCURRENCY): receivers that answer would wait",
			cfg.WebhookConcurrency, most, slow)
	}
	obs, sampleEvery := cfg.Observer, time.Duration(0)
	if obs == nil {
		obs = noObserver{}
	} else {
		sampleEvery = cfg.QueueSampleInterval
		if sampleEvery <= 0 {
			sampleEvery = QueueSampleInterval
		}
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &scanChainWorker{svc: cfg.Service, obs: obs})
	river.AddWorker(workers, &reconcileTransfersWorker{svc: cfg.Service})
	river.AddWorker(workers, &tallyGasWorker{svc: cfg.Service})
	river.AddWorker(workers, &deliverWebhookWorker{svc: cfg.Service, obs: obs})
	river.AddWorker(workers, &deliverACPOrderEventWorker{svc: cfg.Service})
	river.AddWorker(workers, &expireSessionsWorker{svc: cfg.Service})
	addPruneWorkers(workers, cfg.Service)
	river.AddWorker(workers, &settlePaymentWorker{svc: cfg.Service})
	river.AddWorker(workers, &recomputeTrustWorker{svc: cfg.Service})
	river.AddWorker(workers, &settleBatchWorker{svc: cfg.Service})
	river.AddWorker(workers, &settlePendingWorker{svc: cfg.Service})
	river.AddWorker(workers, &sendRefundWorker{svc: cfg.Service})
	river.AddWorker(workers, &sweepPaymentWorker{svc: cfg.Service})
	river.AddWorker(workers, &sweepDustWorker{svc: cfg.Service})
	river.AddWorker(workers, &sendMailWorker{svc: cfg.Service})
	river.AddWorker(workers, &pruneWorker[EraseExpiredMailArgs]{prune: cfg.Service.EraseExpiredMail})
	river.AddWorker(workers, &cardsTickWorker{svc: cfg.Service})
	river.AddWorker(workers, &expireSpendApprovalsWorker{svc: cfg.Service})
	river.AddWorker(workers, &remindApprovalsWorker{svc: cfg.Service})

	// The deposit scans are not River periodic jobs: those are inserted by
	// the elected leader only, and a leader that is killed keeps its
	// leadership until it expires (15 s), during which no chain is scanned;
	// a restarted worker also waits for its election. Every worker process
	// enqueues the scans itself instead (scanTicker): at once when it
	// starts, then on each tick of ScanInterval, the ticks of every process
	// falling together so the singleton job (ScanChainArgs.InsertOpts) is
	// inserted once per tick.
	periodic := append([]*river.PeriodicJob{reconcilePeriodic(), expiryPeriodic(), settlePendingPeriodic(), cardsPeriodic(), spendApprovalsPeriodic(), remindApprovalsPeriodic(), gasPeriodic(), eraseExpiredMailPeriodic()}, prunePeriodics()...)
	var scans []ScanChainArgs
	for _, c := range cfg.Service.ScannedChains() {
		scans = append(scans, ScanChainArgs{Mode: string(c.Mode), Chain: string(c.Chain)})
	}

	riverCfg := &river.Config{
		Logger:       slog.New(quietHandler{Handler: cfg.Logger.Handler(), min: slog.LevelWarn}).With("component", "river"),
		Workers:      workers,
		PeriodicJobs: periodic,
		Middleware:   []rivertype.Middleware{&jobMiddleware{obs: obs}},
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: cfg.Concurrency},
			queueChains:        {MaxWorkers: cfg.Concurrency},
			// Deliveries fetch often: a short cooldown lets a busy queue
			// refill its many workers quickly.
			jobs.WebhookQueue: {MaxWorkers: cfg.WebhookConcurrency, FetchCooldown: min(10*time.Millisecond, cfg.FetchCooldown),
				FetchPollInterval: min(webhookFetchPollInterval, cfg.FetchPollInterval)},
			jobs.SettlementQueue: {MaxWorkers: cfg.Concurrency},
			jobs.MailQueue:       {MaxWorkers: cfg.Concurrency},
		},
		JobTimeout: jobTimeout,
		// A job left running by a worker process that died is handed out
		// again this long after it started: every job gives up at
		// jobTimeout, so one still running past it is orphaned. (River's
		// default, an hour, would hold a killed worker's scan or payout
		// that long; on PostgreSQL liveness.go frees them at once.)
		RescueStuckJobsAfter: jobTimeout + 30*time.Second,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		// Finished jobs are kept an hour, not River's day: chain scans run
		// every 500 ms per chain (about 860,000 rows a day on five chains),
		// and what a job did is recorded in our own tables (deposits,
		// webhook attempts, transfers, settlements), not in river_job.
		CompletedJobRetentionPeriod: time.Hour,
	}
	var live *liveness
	if cfg.DB.IsPostgres() {
		live = &liveness{url: cfg.DB.URL, id: newLivenessID(), logger: cfg.Logger}
		riverCfg.ID = live.id
	}
	client, err := river.NewClient(cfg.DB.RiverDriver(), riverCfg)
	if err != nil {
		return nil, err
	}
	return &Worker{client: client, live: live, db: cfg.DB.SQL, obs: obs, sampleEvery: sampleEvery, logger: cfg.Logger,
		scans: scans, scanEvery: cfg.ScanInterval, headEvery: cfg.HeadPollInterval, svc: cfg.Service}, nil
}

// Client is the River client, for inserting jobs in a transaction.
func (w *Worker) Client() *river.Client[*sql.Tx] { return w.client }

// Run works jobs until ctx ends, then stops softly (running jobs finish).
// On PostgreSQL it first takes its liveness lock and frees what dead workers
// left running, then keeps looking for dead workers while it runs.
func (w *Worker) Run(ctx context.Context) error {
	if w.live != nil {
		if err := w.live.hold(ctx); err != nil {
			return err
		}
		// Released last, after the jobs have stopped.
		defer w.live.release()
		if err := w.live.reap(ctx); err != nil {
			return fmt.Errorf("worker liveness: looking for dead workers: %w", err)
		}
	}
	if err := w.client.Start(ctx); err != nil {
		return err
	}
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		if w.live != nil {
			w.live.run(ctx)
		}
	}()
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		w.scanTicker(ctx)
	}()
	var heads sync.WaitGroup
	if w.headEvery > 0 {
		for _, args := range w.scans {
			mode, err := agentpay.ParseMode(args.Mode)
			if err != nil {
				continue
			}
			heads.Go(func() {
				t := time.NewTicker(w.headEvery)
				defer t.Stop()
				headWatch(ctx, t.C, func(ctx context.Context) (uint64, error) {
					return w.svc.ChainHead(ctx, mode, chains.Name(args.Chain))
				}, func(ctx context.Context) (*rivertype.JobInsertResult, error) {
					return w.client.Insert(ctx, args, nil)
				})
			})
		}
	}
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		if w.sampleEvery > 0 {
			sampleQueues(ctx, w.db, w.obs, w.sampleEvery, w.logger)
		}
	}()
	<-ctx.Done()
	<-liveDone
	<-scanDone
	heads.Wait()
	<-sampleDone
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.client.Stop(stopCtx)
}

// headWatch reads the chain's head at each look (every headEvery in Run)
// and enqueues the chain's scan when it moved past the head a scan was
// last enqueued for, until ctx ends. The scan is a singleton: when one is
// already waiting it will see the new head; when one is running (it may
// have read the head before this block) the insert is skipped, and it is
// tried again every headRetry until it goes in (for up to headRetryFor,
// then at each look), without waiting for the next look: a running scan
// completes its job in its own transaction
// (scanChainWorker), so the retry goes in as soon as that scan has
// committed, in this process or another. Every worker process watches; the
// singleton keeps it one scan. A head that cannot be read, or an insert
// that fails, is left to the next look (and the ticks).
func headWatch(ctx context.Context, looks <-chan time.Time, head func(context.Context) (uint64, error),
	enqueue func(context.Context) (*rivertype.JobInsertResult, error)) {
	var (
		enqueued, seen uint64
		retry          <-chan time.Time // set while seen waits behind a running scan
		behindSince    time.Time        // when it started waiting; zero: not waiting
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-looks:
			if h, err := head(ctx); err == nil && h > seen {
				seen = h
			}
		case <-retry:
		}
		retry = nil
		if seen <= enqueued {
			continue
		}
		res, err := enqueue(ctx)
		if err != nil {
			continue
		}
		if res.UniqueSkippedAsDuplicate && res.Job.State == rivertype.JobStateRunning {
			if behindSince.IsZero() {
				behindSince = time.Now()
			}
			// A scan slower than a normal one (a slow RPC, or its worker
			// dead until the job is freed) is left to the looks: one
			// insert per look, not a hundred a second.
			if time.Since(behindSince) < headRetryFor {
				retry = time.After(headRetry)
			}
			continue
		}
		enqueued, behindSince = seen, time.Time{}
	}
}

// scanTicker enqueues every chain's deposit scan at once, then at each
// multiple of scanEvery (the wall clock's, so every worker process ticks
// together and the singleton scan job is inserted once per tick, the
// others finding it waiting or running), until ctx ends. A failed insert
// (the database briefly unavailable) is logged and the next tick tries
// again.
func (w *Worker) scanTicker(ctx context.Context) {
	if len(w.scans) == 0 {
		return
	}
	for {
		for _, args := range w.scans {
			if _, err := w.client.Insert(ctx, args, nil); err != nil && ctx.Err() == nil {
				w.logger.WarnContext(ctx, "enqueueing a deposit scan", "mode", args.Mode, "chain", args.Chain, "err", err)
			}
		}
		now := time.Now()
		next := now.Truncate(w.scanEvery).Add(w.scanEvery)
		select {
		case <-ctx.Done():
			return
		case <-time.After(next.Sub(now)):
		}
	}
}
