package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/acporderevent"
	"agentpay/ent/merchantfeedentry"
	"agentpay/ent/predicate"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/store"
)

// The retention of webhook history: what a merchant can read and redeliver
// (the webhook log, its feed lines, the ACP order events) is kept for
// Config.WebhookRetention, then deleted by the prune_webhook_history job
// (PruneWebhookHistory), so the tables do not grow forever. Nothing still
// being delivered is ever deleted: an event goes only once none of its
// deliveries is pending (a retrying delivery is pending) and the event,
// every delivery and every delivery's end are older than the retention. A
// redelivery so keeps its event, with all its deliveries and tries, for the
// retention from the redelivery's end: the log never shows an event with
// part of its history gone.

// DefaultWebhookRetention is Config.WebhookRetention's default: 30 days.
const DefaultWebhookRetention = 30 * 24 * time.Hour

// webhookRetentionBatch bounds what one transaction of the retention job
// deletes: this many events, with their deliveries, tries and feed lines.
// The job runs batch after batch until none is left, each committed on its
// own, so it never holds locks on more than a batch nor makes one long
// transaction of a backlog.
const webhookRetentionBatch = 500

func (s *Service) webhookRetention() time.Duration {
	if s.cfg.WebhookRetention > 0 {
		return s.cfg.WebhookRetention
	}
	return DefaultWebhookRetention
}

// PruneWebhookHistory deletes the webhook events and ACP order events past
// the retention (webhookRetention, by the service's clock), in batches of
// webhookRetentionBatch, and returns how many events it deleted.
func (s *Service) PruneWebhookHistory(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.webhookRetention()).UTC()
	total := 0
	for _, prune := range []func(context.Context, time.Time) (int, error){s.pruneWebhookEvents, s.pruneACPOrderEvents} {
		for {
			n, err := prune(ctx, cutoff)
			total += n
			if err != nil {
				return total, err
			}
			if n < webhookRetentionBatch {
				break
			}
		}
	}
	return total, nil
}

// webhookEventExpired is the retention rule of a webhook event: recorded
// before cutoff, no delivery of it pending (being tried or waiting for a
// retry), none created or ended since cutoff. An event that never had a
// delivery (recorded while its mode had no webhook URL) goes by its age.
func webhookEventExpired(cutoff time.Time) predicate.WebhookEvent {
	return webhookevent.And(
		webhookevent.CreatedAtLT(cutoff),
		webhookevent.Not(webhookevent.HasDeliveriesWith(webhookdelivery.Or(
			webhookdelivery.StatusEQ(webhookdelivery.StatusPending),
			webhookdelivery.CreatedAtGTE(cutoff),
			webhookdelivery.CompletedAtGTE(cutoff),
		))),
	)
}

// pruneWebhookEvents deletes one batch of expired webhook events with their
// deliveries, tries and merchant feed lines, in one transaction.
func (s *Service) pruneWebhookEvents(ctx context.Context, cutoff time.Time) (int, error) {
	var n int
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		// Locked (PostgreSQL), then read again: a redelivery locks its
		// event before inserting its delivery (and an insert holds a
		// key-share lock of it besides), so once the batch's
		// events are locked none can gain a delivery, and the second read,
		// a later snapshot, leaves out any that gained one before the lock.
		q := tx.WebhookEvent.Query().Where(webhookEventExpired(cutoff)).
			Order(ent.Asc(webhookevent.FieldCreatedAt)).Limit(webhookRetentionBatch)
		ids, err := store.ForUpdate(s.cfg.DB, q).IDs(ctx)
		if err != nil || len(ids) == 0 {
			return err
		}
		n = len(ids) // a full batch asks for another, even if some stay
		if s.cfg.DB.IsPostgres() {
			if ids, err = tx.WebhookEvent.Query().Where(webhookevent.IDIn(ids...), webhookEventExpired(cutoff)).IDs(ctx); err != nil {
				return err
			}
		}
		return deleteWebhookEvents(ctx, tx, ids)
	})
	if err != nil {
		return 0, fmt.Errorf("agentpay: pruning webhook events: %w", err)
	}
	return n, nil
}

// deleteWebhookEvents deletes events ids and what hangs on them, children
// first (the foreign keys).
func deleteWebhookEvents(ctx context.Context, tx *ent.Tx, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.WebhookAttempt.Delete().Where(webhookattempt.HasDeliveryWith(webhookdelivery.EventIDIn(ids...))).Exec(ctx); err != nil {
		return err
	}
	if _, err := tx.WebhookDelivery.Delete().Where(webhookdelivery.EventIDIn(ids...)).Exec(ctx); err != nil {
		return err
	}
	if _, err := tx.MerchantFeedEntry.Delete().Where(merchantfeedentry.EventIDIn(ids...)).Exec(ctx); err != nil {
		return err
	}
	_, err := tx.WebhookEvent.Delete().Where(webhookevent.IDIn(ids...)).Exec(ctx)
	return err
}

// acpOrderEventExpired is the retention rule of an ACP order event: done
// (succeeded or failed) before cutoff, and not its session's latest. The
// latest stays whatever its age: the session's next event takes the seq
// after it, and its existence is what says the order was created (a
// session with no event left would send order_create again).
func acpOrderEventExpired(cutoff time.Time) predicate.ACPOrderEvent {
	return acporderevent.And(
		acporderevent.StatusNEQ(acporderevent.StatusPending),
		acporderevent.CompletedAtLT(cutoff),
		func(s *entsql.Selector) {
			later := entsql.Table(acporderevent.Table).As("later")
			s.Where(entsql.Exists(entsql.Select(later.C(acporderevent.FieldID)).From(later).Where(entsql.And(
				entsql.ColumnsEQ(later.C(acporderevent.FieldSessionID), s.C(acporderevent.FieldSessionID)),
				entsql.ColumnsGT(later.C(acporderevent.FieldSeq), s.C(acporderevent.FieldSeq)),
			))))
		},
	)
}

// pruneACPOrderEvents deletes one batch of expired ACP order events. What
// makes one expired never reverts (a done event stays done, a later event
// stays later), so the read and the delete need no lock between them.
func (s *Service) pruneACPOrderEvents(ctx context.Context, cutoff time.Time) (int, error) {
	ids, err := s.cfg.DB.Ent.ACPOrderEvent.Query().Where(acpOrderEventExpired(cutoff)).
		Order(ent.Asc(acporderevent.FieldCompletedAt)).Limit(webhookRetentionBatch).IDs(ctx)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if _, err := s.cfg.DB.Ent.ACPOrderEvent.Delete().Where(acporderevent.IDIn(ids...)).Exec(ctx); err != nil {
		return 0, fmt.Errorf("agentpay: pruning ACP order events: %w", err)
	}
	return len(ids), nil
}
