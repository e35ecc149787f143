package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// reconcileInterval is how often sends left in flight are resumed.
const reconcileInterval = 10 * time.Second

// ReconcileTransfersArgs resumes agents' sends stuck pending or submitted
// (agentpay.Service.ReconcileTransfers).
type ReconcileTransfersArgs struct{}

func (ReconcileTransfersArgs) Kind() string { return "reconcile_transfers" }

// InsertOpts keeps one reconciliation waiting or running at a time, across
// every worker process: two at once could relay the same leg twice (safe,
// but it spends gas).
func (ReconcileTransfersArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type reconcileTransfersWorker struct {
	river.WorkerDefaults[ReconcileTransfersArgs]
	svc *agentpay.Service
}

func (w *reconcileTransfersWorker) Work(ctx context.Context, _ *river.Job[ReconcileTransfersArgs]) error {
	_, err := w.svc.ReconcileTransfers(ctx)
	return err
}

// NextRetry retries soon: the next periodic run would do the same work.
func (w *reconcileTransfersWorker) NextRetry(*river.Job[ReconcileTransfersArgs]) time.Time {
	return time.Now().Add(2 * time.Second)
}

// reconcilePeriodic schedules the reconciliation.
func reconcilePeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(reconcileInterval),
		func() (river.JobArgs, *river.InsertOpts) { return ReconcileTransfersArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
