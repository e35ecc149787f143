package worker

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"agentpay/internal/logctx"
)

// Observer is told what the worker does (internal/metrics implements it);
// Config.Observer nil tells no one.
type Observer interface {
	// JobWorked: one job run of kind ended in state (completed, failed,
	// cancelled, snoozed), waited after it was due and took to run.
	JobWorked(kind, state string, waited, took time.Duration)
	// QueueDepth: the unfinished jobs by [queue, state], sampled every
	// QueueSampleInterval.
	QueueDepth(depth map[[2]string]int)
	// Scanned: a deposit scan of a chain read head and now resumes at next,
	// and saw seen deposits for the first time; ScanFailed: a scan failed.
	Scanned(mode, chain string, head, next uint64, seen int)
	ScanFailed(mode, chain string)
	// WebhookAttempt: one webhook try (succeeded, retrying, failed).
	WebhookAttempt(mode, result string, took time.Duration)
}

type noObserver struct{}

func (noObserver) JobWorked(string, string, time.Duration, time.Duration) {}
func (noObserver) QueueDepth(map[[2]string]int)                           {}
func (noObserver) Scanned(string, string, uint64, uint64, int)            {}
func (noObserver) ScanFailed(string, string)                              {}
func (noObserver) WebhookAttempt(string, string, time.Duration)           {}

// jobMiddleware wraps every job run: its context carries job_id and
// job_kind onto every log line written with it (logctx), and the run is
// reported to the observer.
type jobMiddleware struct {
	river.MiddlewareDefaults
	obs Observer
}

var _ rivertype.WorkerMiddleware = (*jobMiddleware)(nil)

func (m *jobMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	ctx = logctx.With(ctx, slog.Int64("job_id", job.ID), slog.String("job_kind", job.Kind))
	start := time.Now()
	err := doInner(ctx)
	m.obs.JobWorked(job.Kind, jobState(err), start.Sub(job.ScheduledAt), time.Since(start))
	return err
}

// jobState is how a run that returned err ends.
func jobState(err error) string {
	var snooze *rivertype.JobSnoozeError
	var cancel *rivertype.JobCancelError
	switch {
	case err == nil:
		return "completed"
	case errors.As(err, &snooze):
		return "snoozed"
	case errors.As(err, &cancel):
		return "cancelled"
	}
	return "failed"
}

// QueueSampleInterval is how often a worker counts the unfinished jobs of
// every queue for its observer: one indexed GROUP BY over river_job.
const QueueSampleInterval = 5 * time.Second

// sampleQueues reports the queues' depth until ctx ends.
func sampleQueues(ctx context.Context, db *sql.DB, obs Observer, every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		depth, err := queueDepth(ctx, db)
		switch {
		case err == nil:
			obs.QueueDepth(depth)
		case ctx.Err() == nil:
			logger.WarnContext(ctx, "counting queued jobs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// queueDepth counts river_job's unfinished jobs by queue and state. Every
// queue the worker works appears with every state, at 0 when empty.
func queueDepth(ctx context.Context, db *sql.DB) (map[[2]string]int, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(qctx, `SELECT queue, state, count(*) FROM river_job
		WHERE state IN ('available', 'scheduled', 'retryable', 'running') GROUP BY queue, state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	depth := map[[2]string]int{}
	for _, q := range workedQueues {
		for _, s := range []string{"available", "scheduled", "retryable", "running"} {
			depth[[2]string{q, s}] = 0
		}
	}
	for rows.Next() {
		var queue, state string
		var n int
		if err := rows.Scan(&queue, &state, &n); err != nil {
			return nil, err
		}
		depth[[2]string{queue, state}] = n
	}
	return depth, rows.Err()
}
