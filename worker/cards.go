package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// cardsInterval is how often card purchases are moved on: a pending
// request lapses, or a card expires, at most this late; a reservation or
// a return left in flight is resumed this soon.
const cardsInterval = 15 * time.Second

// CardsTickArgs expires card requests and unused cards, issues the cards
// of completed reservations and drives the returns of unspent money
// (agentpay.Service.CardsTick).
type CardsTickArgs struct{}

func (CardsTickArgs) Kind() string { return "cards_tick" }

// InsertOpts keeps one run waiting or running at a time across every
// worker process: two at once are safe (every move is conditional, every
// return carries a fixed ref) but would relay a return twice.
func (CardsTickArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

type cardsTickWorker struct {
	river.WorkerDefaults[CardsTickArgs]
	svc *agentpay.Service
}

func (w *cardsTickWorker) Work(ctx context.Context, _ *river.Job[CardsTickArgs]) error {
	_, err := w.svc.CardsTick(ctx)
	return err
}

// NextRetry retries soon: the next periodic run would do the same work.
func (w *cardsTickWorker) NextRetry(*river.Job[CardsTickArgs]) time.Time {
	return time.Now().Add(5 * time.Second)
}

// cardsPeriodic schedules the cards job.
func cardsPeriodic() *river.PeriodicJob {
	return river.NewPeriodicJob(
		river.PeriodicInterval(cardsInterval),
		func() (river.JobArgs, *river.InsertOpts) { return CardsTickArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true},
	)
}
