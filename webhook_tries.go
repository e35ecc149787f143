package agentpay

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/store"
	"agentpay/internal/webhooksend"
)

// webhookTry is one try to record: the attempt row and the delivery's new
// state.
type webhookTry struct {
	attemptID     uuid.UUID
	deliveryID    uuid.UUID
	at            time.Time
	statusCode    int
	duration      time.Duration
	errText       string
	status        webhookdelivery.Status
	nextAttemptAt *time.Time // nil once the delivery is done
	now           time.Time
	// number, merchantID, livemode and eventID place the try in its
	// merchant's feed (merchant_feed.go), written with it.
	number     int
	merchantID uuid.UUID
	livemode   bool
	eventID    uuid.UUID
}

// recordWebhookTry writes the attempt and updates the delivery (attempts+1,
// status, next or completion time) together, if the delivery is still
// pending, with the try's feed line (merchant_feed.go). applied is false
// when it no longer was (another run finished it); the attempt is logged
// either way.
//
// Tries recorded at the same time share their writes: on PostgreSQL one
// statement and one commit (webhooksend.RecordPostgres); on SQLite one
// transaction (webhookTriesSQLite). Each try is still committed before
// this returns, so its job completes only once its outcome is durable.
func (s *Service) recordWebhookTry(ctx context.Context, t webhookTry) (*ent.WebhookAttempt, bool, error) {
	t.attemptID = uuid.New()
	a := &ent.WebhookAttempt{
		ID: t.attemptID, CreatedAt: t.now, UpdatedAt: t.now, DeliveryID: t.deliveryID,
		StatusCode: t.statusCode, DurationMs: t.duration.Milliseconds(), Error: t.errText, At: t.at,
	}
	var (
		applied bool
		err     error
	)
	if s.cfg.DB.IsPostgres() {
		// When ctx ends first the batch may still commit the try: the
		// caller's job runs again and finds the delivery as that commit
		// left it.
		applied, err = webhooksend.RecordPostgres(ctx, s.cfg.DB, webhooksend.Try{
			AttemptID: t.attemptID, DeliveryID: t.deliveryID, At: t.at, StatusCode: t.statusCode,
			Duration: t.duration, Error: t.errText, Status: string(t.status), NextAttemptAt: t.nextAttemptAt,
			Now: t.now, MerchantID: t.merchantID, Livemode: t.livemode, EventID: t.eventID, FeedLine: feedAttemptData(t),
		})
	} else {
		applied, err = s.recordWebhookTrySQLite(ctx, t)
	}
	if err != nil {
		return nil, false, err
	}
	return a, applied, nil
}

// sqliteTryCall is one try waiting for its batch (webhookTriesSQLite).
type sqliteTryCall struct {
	try     webhookTry
	done    chan struct{}
	applied bool
	err     error
}

// webhookTriesSQLite batches the tries recorded at the same time on SQLite
// into one transaction (store.GroupBatch), at most 200 a transaction:
// every statement of the process takes the one connection in turn, and a
// transaction each made the tries of a busy worker queue for it.
func newWebhookTriesSQLite(s *Service) *store.GroupBatch[*sqliteTryCall] {
	return store.NewGroupBatch(200, s.recordWebhookTriesSQLite)
}

// recordWebhookTrySQLite records t with the tries waiting beside it.
func (s *Service) recordWebhookTrySQLite(ctx context.Context, t webhookTry) (bool, error) {
	c := &sqliteTryCall{try: t, done: make(chan struct{})}
	s.webhookTriesSQLite.Submit(c)
	select {
	case <-c.done:
		return c.applied, c.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// recordWebhookTriesSQLite writes a batch of tries in one transaction and
// answers each. A failure fails them all: none is recorded, and their jobs
// run again.
func (s *Service) recordWebhookTriesSQLite(batch []*sqliteTryCall) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		for _, c := range batch {
			applied, err := s.writeWebhookTry(ctx, tx, sqlTx, c.try)
			if err != nil {
				return err
			}
			c.applied = applied
		}
		return nil
	})
	for _, c := range batch {
		if err != nil {
			c.applied, c.err = false, err
		}
		close(c.done)
	}
}

// writeWebhookTry writes one try in tx: its attempt, its delivery's state if
// still pending (applied), its feed line.
func (s *Service) writeWebhookTry(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, t webhookTry) (applied bool, err error) {
	_, err = tx.WebhookAttempt.Create().
		SetID(t.attemptID).
		SetDeliveryID(t.deliveryID).
		SetStatusCode(t.statusCode).
		SetDurationMs(t.duration.Milliseconds()).
		SetError(t.errText).
		SetAt(t.at).
		Save(ctx)
	if err != nil {
		return false, err
	}
	u := tx.WebhookDelivery.Update().
		Where(webhookdelivery.ID(t.deliveryID), webhookdelivery.StatusEQ(webhookdelivery.StatusPending)).
		AddAttempts(1).
		SetLastAttemptAt(t.at).
		SetStatus(t.status)
	if t.nextAttemptAt != nil {
		u.SetNextAttemptAt(*t.nextAttemptAt)
	} else {
		u.ClearNextAttemptAt().SetCompletedAt(t.now)
	}
	n, err := u.Save(ctx)
	if err != nil {
		return false, err
	}
	return n > 0, s.recordFeedLine(ctx, tx, sqlTx, t.merchantID, t.livemode, t.eventID, FeedDeliveryAttempt, feedAttemptData(t))
}
