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
// before SMTP_URL was set, goes out once it can. When the last attempt
// fails the message is given up (GiveUpMail: marked failed, its bodies
// erased), since River will not run it again.
type sendMailWorker struct {
	river.WorkerDefaults[jobs.SendMailArgs]
	svc *agentpay.Service
}

func (w *sendMailWorker) Work(ctx context.Context, job *river.Job[jobs.SendMailArgs]) error {
	err := w.svc.SendMail(ctx, job.Args.MessageID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	if err != nil && job.Attempt >= job.MaxAttempts {
		if gerr := w.svc.GiveUpMail(context.WithoutCancel(ctx), job.Args.MessageID, err); gerr != nil {
			return errors.Join(err, gerr)
		}
	}
	return err
}

// Timeout leaves room for the SMTP conversation and recording it.
func (w *sendMailWorker) Timeout(*river.Job[jobs.SendMailArgs]) time.Duration {
	return agentpay.MailSendTimeout + 20*time.Second
}

// eraseExpiredMailInterval is how often unsent messages whose link expired
// are ended: a sign-in link lives 15 minutes, so its body outlives it in
// an unsent row by at most this.
const eraseExpiredMailInterval = time.Minute

// EraseExpiredMailArgs ends the unsent messages whose link expired
// (agentpay.Service.EraseExpiredMail).
type EraseExpiredMailArgs struct{}

func (EraseExpiredMailArgs) Kind() string { return "erase_expired_mail" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (EraseExpiredMailArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

func eraseExpiredMailPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(eraseExpiredMailInterval),
		func() (river.JobArgs, *river.InsertOpts) { return EraseExpiredMailArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
