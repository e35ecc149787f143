package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"agentpay"
	"agentpay/internal/jobs"
)

// deliverWebhookWorker sends a job's webhook delivery, and with it a batch
// of its merchant's due deliveries when its receiver answers
// (agentpay.Service.DeliverWebhookBatch decides everything: what to send,
// whether each try succeeded, when the next one is due, when a delivery has
// failed). A job whose delivery another batch holds, or whose next try is
// not due (a batch tried it and it failed), is snoozed until then
// (Wait): it then finds it done, or due and tries it.
//
// Retries: a failed try returns an error, so River schedules the job again
// at NextRetry, which is the time the service computed from
// WEBHOOK_RETRY_DELAYS for that delivery. The time is handed from Work to
// NextRetry through retryAt, keyed by job id: River calls NextRetry in the
// same process right after Work returns the error. An error before any try
// (database, vault) has no entry and is retried after a short backoff; it
// does not use up one of the delivery's tries, which the service counts
// itself.
//
// A delivery whose merchant is at its cap of tries in flight (Busy) is
// snoozed for agentpay.Service.WebhookBusyWait (its turn behind the
// merchant's other waiting deliveries when its receiver answers quickly,
// a delay growing with the times it was already snoozed otherwise): River
// runs it again then without counting an attempt, so waiting
// for a slot never fails a delivery, and the worker it ran on is free at
// once for other merchants' deliveries.
type deliverWebhookWorker struct {
	river.WorkerDefaults[jobs.DeliverWebhookArgs]
	svc     *agentpay.Service
	obs     Observer
	retryAt sync.Map // job id (int64) -> time.Time
}

func (w *deliverWebhookWorker) Work(ctx context.Context, job *river.Job[jobs.DeliverWebhookArgs]) error {
	if a := job.Args; a.MerchantID != uuid.Nil && w.svc.WebhookSlotsFull(a.MerchantID, a.Livemode) {
		return river.JobSnooze(w.svc.WebhookBusyWait(a.MerchantID, a.Livemode, snoozes(job.Metadata)))
	}
	batch, err := w.svc.DeliverWebhookBatch(ctx, job.Args.DeliveryID, job.Args.MerchantID, job.Args.Livemode, func(r agentpay.WebhookDeliveryResult) {
		if r.Attempt != nil {
			w.obs.WebhookAttempt(webhookMode(r.Livemode), webhookResult(r), time.Duration(r.Attempt.DurationMs)*time.Millisecond)
		}
	})
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if batch.Wait > 0 {
		return river.JobSnooze(batch.Wait)
	}
	res := batch.Own
	if res.Attempt != nil {
		w.obs.WebhookAttempt(webhookMode(res.Livemode), webhookResult(res), time.Duration(res.Attempt.DurationMs)*time.Millisecond)
	}
	if res.Done {
		return nil
	}
	if res.Busy {
		return river.JobSnooze(w.svc.WebhookBusyWait(job.Args.MerchantID, res.Livemode, snoozes(job.Metadata)))
	}
	if job.Attempt < job.MaxAttempts {
		w.retryAt.Store(job.ID, res.RetryAt)
	}
	if res.Err == nil {
		return fmt.Errorf("webhook try %d failed", res.Tries)
	}
	return fmt.Errorf("webhook try %d failed: %w", res.Tries, res.Err)
}

// NextRetry is the delivery's next try as the service scheduled it.
func (w *deliverWebhookWorker) NextRetry(job *river.Job[jobs.DeliverWebhookArgs]) time.Time {
	if v, ok := w.retryAt.LoadAndDelete(job.ID); ok {
		return v.(time.Time)
	}
	return time.Now().Add(min(time.Duration(job.Attempt)*2*time.Second, time.Minute))
}

// Timeout leaves room for the HTTP try and recording it.
func (w *deliverWebhookWorker) Timeout(*river.Job[jobs.DeliverWebhookArgs]) time.Duration {
	return agentpay.WebhookRunTimeout
}

// webhookResult names how a try went for the observer: succeeded,
// retrying (failed, another try is due) or failed (no try left).
func webhookResult(res agentpay.WebhookDeliveryResult) string {
	switch {
	case res.Err == nil:
		return "succeeded"
	case res.Done:
		return "failed"
	}
	return "retrying"
}

func webhookMode(livemode bool) string {
	if livemode {
		return string(agentpay.ModeLive)
	}
	return string(agentpay.ModeTest)
}

// snoozes is how many times River has snoozed a job (its metadata's
// "snoozes"); 0 when unknown.
func snoozes(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.Snoozes
}
