package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// expiryInterval is how often sessions past their deadline are expired.
const expiryInterval = 5 * time.Second

// ExpireSessionsArgs expires checkout sessions past expires_at
// (agentpay.Service.ExpireSessions), then records on the deposit addresses
// of sessions that ended when they did, from which the deposit scan watches
// them the late-payment window more (agentpay.Service.EndDepositWatches).
type ExpireSessionsArgs struct{}

func (ExpireSessionsArgs) Kind() string { return "expire_sessions" }

// InsertOpts keeps one expiry run waiting or running at a time across every
// worker process (each session is decided under its row lock anyway).
func (ExpireSessionsArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type expireSessionsWorker struct {
	river.WorkerDefaults[ExpireSessionsArgs]
	svc *agentpay.Service
}

func (w *expireSessionsWorker) Work(ctx context.Context, _ *river.Job[ExpireSessionsArgs]) error {
	if _, err := w.svc.ExpireSessions(ctx); err != nil {
		return err
	}
	_, err := w.svc.EndDepositWatches(ctx)
	return err
}

// NextRetry retries soon: the next periodic run would do the same work.
func (w *expireSessionsWorker) NextRetry(*river.Job[ExpireSessionsArgs]) time.Time {
	return time.Now().Add(time.Second)
}

// expiryPeriodic schedules the expiry run.
func expiryPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(expiryInterval),
		func() (river.JobArgs, *river.InsertOpts) { return ExpireSessionsArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
