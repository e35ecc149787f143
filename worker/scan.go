package worker

import (
	"context"
	"database/sql"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	"agentpay"
	"agentpay/chains"
)

// ScanChainArgs scans one chain of one mode for deposits.
type ScanChainArgs struct {
	Mode  string `json:"mode"`
	Chain string `json:"chain"`
}

func (ScanChainArgs) Kind() string { return "scan_chain" }

// InsertOpts keeps at most one scan of a chain waiting or running: a slow
// RPC must not pile scans up behind it.
func (ScanChainArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(queueChains)
}

type scanChainWorker struct {
	river.WorkerDefaults[ScanChainArgs]
	svc *agentpay.Service
	obs Observer
}

func (w *scanChainWorker) Work(ctx context.Context, job *river.Job[ScanChainArgs]) error {
	mode, err := agentpay.ParseMode(job.Args.Mode)
	if err != nil {
		return river.JobCancel(err)
	}
	// The job is completed in the scan's own transaction: left to River,
	// whose completer records finished jobs in batches (every 50 ms, later
	// on a busy database), a scan that has returned stays `running` and
	// the singleton refuses the chain's next scan meanwhile, so a block
	// sealed during this scan waited that long before it was scanned
	// (BenchmarkConfirmedWebhookLatency's slow third). The completer's own
	// update then finds the job no longer running and leaves it.
	res, err := w.svc.ScanDepositsWith(ctx, mode, chains.Name(job.Args.Chain), func(ctx context.Context, tx *sql.Tx) error {
		_, err := river.JobCompleteTx[riverdriver.Driver[*sql.Tx]](ctx, tx, job)
		return err
	})
	if err != nil {
		w.obs.ScanFailed(job.Args.Mode, job.Args.Chain)
		return err
	}
	seen := 0
	for _, ev := range res.Events {
		if ev.Kind == chains.DepositSeen {
			seen++
		}
	}
	w.obs.Scanned(job.Args.Mode, job.Args.Chain, res.Head, res.Next, seen)
	return nil
}

// NextRetry retries a failed scan soon: the next periodic scan would pick
// the work up anyway.
func (w *scanChainWorker) NextRetry(*river.Job[ScanChainArgs]) time.Time {
	return time.Now().Add(time.Second)
}
