package worker

import (
	"context"
	"errors"

	"github.com/riverqueue/river"

	"agentpay"
	"agentpay/internal/jobs"
)

// recomputeTrustWorker recomputes one agent's trust score and tier once a
// change of its inputs committed (agentpay.Service.RecomputeTrust decides
// everything; idempotent, so a job run twice stores one score). An agent
// gone is nothing to do.
type recomputeTrustWorker struct {
	river.WorkerDefaults[jobs.RecomputeTrustArgs]
	svc *agentpay.Service
}

func (w *recomputeTrustWorker) Work(ctx context.Context, job *river.Job[jobs.RecomputeTrustArgs]) error {
	err := w.svc.RecomputeTrust(ctx, job.Args.AgentID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}
