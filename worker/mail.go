package worker

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
	"agentpay/internal/jobs"
)

// sendMailWorker sends one outbox message per job
// (agentpay.Service.SendMail decides: already sent, sent now, refused for
// good, or an error to try again). A failed try is retried with River's
// default backoff (attempt⁴ seconds: 1 s, 16 s, 81 s... about three weeks
// over the 25 attempts), so mail queued while the SMTP server is down, or
// before SMTP_URL was set, goes out once it can.
type sendMailWorker struct {
	river.WorkerDefaults[jobs.SendMailArgs]
	svc *agentpay.Service
}

func (w *sendMailWorker) Work(ctx context.Context, job *river.Job[jobs.SendMailArgs]) error {
	err := w.svc.SendMail(ctx, job.Args.MessageID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// Timeout leaves room for the SMTP conversation and recording it.
func (w *sendMailWorker) Timeout(*river.Job[jobs.SendMailArgs]) time.Duration {
	return agentpay.MailSendTimeout + 20*time.Second
}
