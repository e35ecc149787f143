package worker

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"agentpay"
)

// pruneInterval is how often expired rows are deleted: signature
// challenges, idempotency keys, passkey ceremonies, identity callback
// events, dashboard sessions and webhook history, each by its own job.
const pruneInterval = time.Hour

// PruneChallengesArgs deletes expired signature challenges
// (agentpay.Service.PruneSignatureChallenges).
type PruneChallengesArgs struct{}

func (PruneChallengesArgs) Kind() string { return "prune_signature_challenges" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PruneChallengesArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

// PruneIdempotencyKeysArgs deletes idempotency keys past their 24 hours
// (agentpay.Service.PruneIdempotencyKeys).
type PruneIdempotencyKeysArgs struct{}

func (PruneIdempotencyKeysArgs) Kind() string { return "prune_idempotency_keys" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PruneIdempotencyKeysArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

// PruneIdentityCallbacksArgs deletes applied identity callback events
// past any replay's signature window
// (agentpay.Service.PruneIdentityCallbacks).
type PruneIdentityCallbacksArgs struct{}

func (PruneIdentityCallbacksArgs) Kind() string { return "prune_identity_callbacks" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PruneIdentityCallbacksArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

// PrunePasskeyCeremoniesArgs deletes expired passkey ceremonies
// (agentpay.Service.PrunePasskeyCeremonies).
type PrunePasskeyCeremoniesArgs struct{}

func (PrunePasskeyCeremoniesArgs) Kind() string { return "prune_passkey_ceremonies" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PrunePasskeyCeremoniesArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

// PruneDashboardSessionsArgs deletes expired dashboard sessions
// (agentpay.Service.PruneDashboardSessions).
type PruneDashboardSessionsArgs struct{}

func (PruneDashboardSessionsArgs) Kind() string { return "prune_dashboard_sessions" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PruneDashboardSessionsArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

// PruneWebhookHistoryArgs deletes webhook events and ACP order events past
// the webhook retention, never one still being delivered
// (agentpay.Service.PruneWebhookHistory).
type PruneWebhookHistoryArgs struct{}

func (PruneWebhookHistoryArgs) Kind() string { return "prune_webhook_history" }

// InsertOpts keeps one run waiting or running at a time across every worker
// process.
func (PruneWebhookHistoryArgs) InsertOpts() river.InsertOpts {
	return singletonOpts(river.QueueDefault)
}

// pruneWorker runs one of the service's prunings for its job kind A.
type pruneWorker[A river.JobArgs] struct {
	river.WorkerDefaults[A]
	prune func(context.Context) (int, error)
}

func (w *pruneWorker[A]) Work(ctx context.Context, _ *river.Job[A]) error {
	_, err := w.prune(ctx)
	return err
}

// addPruneWorkers registers the prunings' workers.
func addPruneWorkers(workers *river.Workers, svc *agentpay.Service) {
	river.AddWorker(workers, &pruneWorker[PruneChallengesArgs]{prune: svc.PruneSignatureChallenges})
	river.AddWorker(workers, &pruneWorker[PruneIdempotencyKeysArgs]{prune: svc.PruneIdempotencyKeys})
	river.AddWorker(workers, &pruneWorker[PruneIdentityCallbacksArgs]{prune: svc.PruneIdentityCallbacks})
	river.AddWorker(workers, &pruneWorker[PrunePasskeyCeremoniesArgs]{prune: svc.PrunePasskeyCeremonies})
	river.AddWorker(workers, &pruneWorker[PruneDashboardSessionsArgs]{prune: svc.PruneDashboardSessions})
	river.AddWorker(workers, &pruneWorker[PruneWebhookHistoryArgs]{prune: svc.PruneWebhookHistory})
}

// prunePeriodics schedules the prunings, each every pruneInterval and once
// at start.
func prunePeriodics() []*river.PeriodicJob {
	var out []*river.PeriodicJob
	for _, args := range []river.JobArgs{PruneChallengesArgs{}, PruneIdempotencyKeysArgs{}, PruneIdentityCallbacksArgs{}, PrunePasskeyCeremoniesArgs{}, PruneDashboardSessionsArgs{}, PruneWebhookHistoryArgs{}} {
		out = append(out, river.NewPeriodicJob(
			river.PeriodicInterval(pruneInterval),
			func() (river.JobArgs, *river.InsertOpts) { return args, nil },
			&river.PeriodicJobOpts{RunOnStart: true},
		))
	}
	return out
}
