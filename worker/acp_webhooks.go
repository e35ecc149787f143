package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
	"agentpay/internal/jobs"
)

// deliverACPOrderEventWorker sends one ACP order webhook per job run
// (agentpay.Service.DeliverACPOrderEvent decides what to send, whether the
// try succeeded, when the next one is due and when the event has failed).
// A failed try returns an error and River runs the job again at the time
// the service scheduled (handed to NextRetry through retryAt, as for the
// merchant's own deliveries); an event waiting for its session's earlier
// one is snoozed without counting an attempt.
type deliverACPOrderEventWorker struct {
	river.WorkerDefaults[jobs.DeliverACPOrderEventArgs]
	svc     *agentpay.Service
	retryAt sync.Map // job id (int64) -> time.Time
}

func (w *deliverACPOrderEventWorker) Work(ctx context.Context, job *river.Job[jobs.DeliverACPOrderEventArgs]) error {
	res, err := w.svc.DeliverACPOrderEvent(ctx, job.Args.EventID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	switch {
	case res.Done:
		return nil
	case res.Waiting:
		return river.JobSnooze(agentpay.ACPOrderWaitDelay)
	}
	if job.Attempt < job.MaxAttempts {
		w.retryAt.Store(job.ID, res.RetryAt)
	}
	return fmt.Errorf("ACP order webhook try %d failed: %w", res.Tries, res.Err)
}

// NextRetry is the event's next try as the service scheduled it.
func (w *deliverACPOrderEventWorker) NextRetry(job *river.Job[jobs.DeliverACPOrderEventArgs]) time.Time {
	if v, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		return v.(time.Time)
	}
	return time.Now().Add(min(time.Duration(job.Attempt)*2*time.Second, time.Minute))
}

// Timeout leaves room for the HTTP try and recording it.
func (w *deliverACPOrderEventWorker) Timeout(*river.Job[jobs.DeliverACPOrderEventArgs]) time.Duration {
	return agentpay.WebhookRunTimeout
}
