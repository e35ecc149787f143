package worker

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
	"agentpay/internal/jobs"
)

// settlePaymentWorker runs one settlement step by step
// (agentpay.Service.SettlePayment decides everything). A run that has to
// wait (no settlement address yet, a leg not included within the wait,
// treasury short of funds) ends the job; settle_pending picks the payment up
// again.
type settlePaymentWorker struct {
	river.WorkerDefaults[jobs.SettlePaymentArgs]
	svc *agentpay.Service
}

func (w *settlePaymentWorker) Work(ctx context.Context, job *river.Job[jobs.SettlePaymentArgs]) error {
	_, err := w.svc.SettlePayment(ctx, job.Args.PaymentID)
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// NextRetry retries a failed step soon and never later than two minutes:
// River's default backoff would leave a payout waiting for hours.
func (w *settlePaymentWorker) NextRetry(job *river.Job[jobs.SettlePaymentArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt)*5*time.Second, 2*time.Minute))
}

// settleBatchWorker pays one merchant, chain and mode's settlement batch,
// forming it once due (agentpay.Service.SettleBatch decides everything).
type settleBatchWorker struct {
	river.WorkerDefaults[jobs.SettleBatchArgs]
	svc *agentpay.Service
}

func (w *settleBatchWorker) Work(ctx context.Context, job *river.Job[jobs.SettleBatchArgs]) error {
	_, err := w.svc.SettleBatch(ctx, agentpay.SettlementKey{MerchantID: job.Args.MerchantID, Livemode: job.Args.Livemode, Chain: job.Args.Chain})
	if errors.Is(err, agentpay.ErrNotFound) {
		return river.JobCancel(err)
	}
	return err
}

// NextRetry as settle_payment's.
func (w *settleBatchWorker) NextRetry(job *river.Job[jobs.SettleBatchArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt)*5*time.Second, 2*time.Minute))
}

// settlePendingInterval is how often open settlements are looked at again.
const settlePendingInterval = 15 * time.Second

// SettlePendingArgs enqueues a settle_payment job for every payment whose
// sweep is left to do (a retry after the chain refused, a job lost to a
// crash), a settle_batch job for every merchant, chain and mode with an
// open batch or swept payments waiting for one (which forms the batch once
// due: minimum or interval), a send_refund job for every refund left open, a
// sweep_payment job for every held payment not yet swept, and a sweep_dust
// job for every deposit address whose dust is worth the gas or whose dust
// sweep is under way.
type SettlePendingArgs struct{}

func (SettlePendingArgs) Kind() string { return "settle_pending" }

// InsertOpts keeps one run waiting or running at a time.
func (SettlePendingArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type settlePendingWorker struct {
	river.WorkerDefaults[SettlePendingArgs]
	svc *agentpay.Service
}

func (w *settlePendingWorker) Work(ctx context.Context, _ *river.Job[SettlePendingArgs]) error {
	payments, err := w.svc.PendingSettlements(ctx, settlePendingInterval, 500)
	if err != nil {
		return err
	}
	refunds, err := w.svc.PendingRefunds(ctx, settlePendingInterval, 500)
	if err != nil {
		return err
	}
	held, err := w.svc.HeldUnswept(ctx, settlePendingInterval, 500)
	if err != nil {
		return err
	}
	dust, err := w.svc.DustToSweep(ctx, settlePendingInterval, 500)
	if err != nil {
		return err
	}
	batches, err := w.svc.DueSettlements(ctx, settlePendingInterval, 500)
	if err != nil || len(payments)+len(refunds)+len(held)+len(batches)+len(dust) == 0 {
		return err
	}
	params := make([]river.InsertManyParams, 0, len(payments)+len(refunds)+len(held)+len(batches)+len(dust))
	for _, k := range batches {
		params = append(params, river.InsertManyParams{Args: jobs.SettleBatchArgs{MerchantID: k.MerchantID, Livemode: k.Livemode, Chain: k.Chain}})
	}
	for _, id := range held {
		params = append(params, river.InsertManyParams{Args: jobs.SweepPaymentArgs{PaymentID: id}})
	}
	for _, id := range payments {
		params = append(params, river.InsertManyParams{Args: jobs.SettlePaymentArgs{PaymentID: id}})
	}
	for _, id := range refunds {
		params = append(params, river.InsertManyParams{Args: jobs.SendRefundArgs{RefundID: id}})
	}
	for _, id := range dust {
		params = append(params, river.InsertManyParams{Args: jobs.SweepDustArgs{DepositAddressID: id}})
	}
	_, err = river.ClientFromContext[*sql.Tx](ctx).InsertMany(ctx, params)
	return err
}

func settlePendingPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(settlePendingInterval),
		func() (river.JobArgs, *river.InsertOpts) { return SettlePendingArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
