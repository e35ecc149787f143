package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// spendApprovalsInterval is how often held operations past their deadline
// are expired: an approval's expiry is told (approval.expired, the
// agent's account event) at most this late. Approving after the deadline
// is refused at once whatever this says.
const spendApprovalsInterval = 15 * time.Second

// ExpireSpendApprovalsArgs ends the operations a spending policy held that
// no human decided before their deadline
// (agentpay.Service.ExpireSpendApprovals).
type ExpireSpendApprovalsArgs struct{}

func (ExpireSpendApprovalsArgs) Kind() string { return "expire_spend_approvals" }

// InsertOpts keeps one run waiting or running at a time across every
// worker process (each approval moves by a conditional update anyway).
func (ExpireSpendApprovalsArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type expireSpendApprovalsWorker struct {
	river.WorkerDefaults[ExpireSpendApprovalsArgs]
	svc *agentpay.Service
}

func (w *expireSpendApprovalsWorker) Work(ctx context.Context, _ *river.Job[ExpireSpendApprovalsArgs]) error {
	_, err := w.svc.ExpireSpendApprovals(ctx)
	return err
}

// NextRetry retries soon: the next periodic run would do the same work.
func (w *expireSpendApprovalsWorker) NextRetry(*river.Job[ExpireSpendApprovalsArgs]) time.Time {
	return time.Now().Add(5 * time.Second)
}

// spendApprovalsPeriodic schedules the expiry of held operations.
func spendApprovalsPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(spendApprovalsInterval),
		func() (river.JobArgs, *river.InsertOpts) { return ExpireSpendApprovalsArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}

// RemindApprovalsArgs mails the deciders of held operations and card
// requests about to expire, once each (agentpay.Service.RemindApprovals),
// on the expiry job's beat.
type RemindApprovalsArgs struct{}

func (RemindApprovalsArgs) Kind() string { return "remind_approvals" }

// InsertOpts keeps one run waiting or running at a time across every
// worker process (each reminder is claimed by a conditional update anyway).
func (RemindApprovalsArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type remindApprovalsWorker struct {
	river.WorkerDefaults[RemindApprovalsArgs]
	svc *agentpay.Service
}

func (w *remindApprovalsWorker) Work(ctx context.Context, _ *river.Job[RemindApprovalsArgs]) error {
	_, err := w.svc.RemindApprovals(ctx)
	return err
}

// NextRetry retries soon: the next periodic run would do the same work.
func (w *remindApprovalsWorker) NextRetry(*river.Job[RemindApprovalsArgs]) time.Time {
	return time.Now().Add(5 * time.Second)
}

func remindApprovalsPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(spendApprovalsInterval),
		func() (river.JobArgs, *river.InsertOpts) { return RemindApprovalsArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
