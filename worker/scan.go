package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

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
	res, err := w.svc.ScanDeposits(ctx, mode, chains.Name(job.Args.Chain))
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
