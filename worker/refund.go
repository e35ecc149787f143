package worker

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
	"agentpay/internal/jobs"
)

// sendRefundWorker drives one refund's transfer
// (agentpay.Service.SendRefund decides everything). A run that has to wait
// (treasury short, a transfer not included within the wait) ends the job;
// settle_pending picks the refund up again.
type sendRefundWorker struct {
	river.WorkerDefaults[jobs.SendRefundArgs]
	svc *agentpay.Service
}

func (w *sendRefundWorker) Work(ctx context.Context, job *river.Job[jobs.SendRefundArgs]) error {
	_, err := w.svc.SendRefund(ctx, job.Args.RefundID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// NextRetry as settle_payment's: soon, and never later than two minutes.
func (w *sendRefundWorker) NextRetry(job *river.Job[jobs.SendRefundArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt)*5*time.Second, 2*time.Minute))
}

// sweepPaymentWorker sweeps one held payment to the treasury
// (agentpay.Service.SweepHeldPayment decides everything); a run that has to
// wait ends the job, and settle_pending picks the payment up again.
type sweepPaymentWorker struct {
	river.WorkerDefaults[jobs.SweepPaymentArgs]
	svc *agentpay.Service
}

func (w *sweepPaymentWorker) Work(ctx context.Context, job *river.Job[jobs.SweepPaymentArgs]) error {
	_, err := w.svc.SweepHeldPayment(ctx, job.Args.PaymentID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// NextRetry as settle_payment's.
func (w *sweepPaymentWorker) NextRetry(job *river.Job[jobs.SweepPaymentArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt)*5*time.Second, 2*time.Minute))
}

// sweepDustWorker sweeps one deposit address's dust to the treasury once
// it is worth the gas (agentpay.Service.SweepDust decides everything); a
// run that has to wait ends the job, and settle_pending picks the address
// up again.
type sweepDustWorker struct {
	river.WorkerDefaults[jobs.SweepDustArgs]
	svc *agentpay.Service
}

func (w *sweepDustWorker) Work(ctx context.Context, job *river.Job[jobs.SweepDustArgs]) error {
	_, err := w.svc.SweepDust(ctx, job.Args.DepositAddressID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// NextRetry as settle_payment's.
func (w *sweepDustWorker) NextRetry(job *river.Job[jobs.SweepDustArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt)*5*time.Second, 2*time.Minute))
}
