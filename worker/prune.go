package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// pruneInterval is how often expired signature challenges are deleted.
const pruneInterval = time.Hour

// PruneChallengesArgs deletes expired signature challenges
// (agentpay.Service.PruneSignatureChallenges).
type PruneChallengesArgs struct{}

func (PruneChallengesArgs) Kind() string { return "prune_signature_challenges" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PruneChallengesArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type pruneChallengesWorker struct {
	river.WorkerDefaults[PruneChallengesArgs]
	svc *agentpay.Service
}

func (w *pruneChallengesWorker) Work(ctx context.Context, _ *river.Job[PruneChallengesArgs]) error {
	_, err := w.svc.PruneSignatureChallenges(ctx)
	return err
}

// prunePeriodic schedules the pruning.
func prunePeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(pruneInterval),
		func() (river.JobArgs, *river.InsertOpts) { return PruneChallengesArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
