package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// gasTallyInterval is how often the cost of the treasury's completed
// transactions is read into the gas ledger.
const gasTallyInterval = 30 * time.Second

// TallyGasArgs reads what the treasury's completed transactions cost
// (agentpay.Service.TallyGas).
type TallyGasArgs struct{}

func (TallyGasArgs) Kind() string { return "tally_gas" }

// InsertOpts keeps one tally waiting or running at a time: two at once
// would read the same receipts twice (harmless, the ledger keeps one row
// per transaction, but wasted RPC calls).
func (TallyGasArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type tallyGasWorker struct {
	river.WorkerDefaults[TallyGasArgs]
	svc *agentpay.Service
}

func (w *tallyGasWorker) Work(ctx context.Context, _ *river.Job[TallyGasArgs]) error {
	_, err := w.svc.TallyGas(ctx)
	return err
}

// NextRetry retries at the next interval's pace: the periodic run does the
// same work.
func (w *tallyGasWorker) NextRetry(*river.Job[TallyGasArgs]) time.Time {
	return time.Now().Add(gasTallyInterval)
}

func gasPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(gasTallyInterval),
		func() (river.JobArgs, *river.InsertOpts) { return TallyGasArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
