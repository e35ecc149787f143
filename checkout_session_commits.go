package agentpay

import (
	"context"
	"errors"
	"time"

	"agentpay/ent"
	"agentpay/internal/store"
)

// Session creates share commits (issue 26, docs/performance.md): the rows
// of the creates that arrive while one insert runs are written by the next
// as one multi-row statement (internal/store's GroupBatch), so under load
// the database plans, writes and flushes once for a batch of creates
// instead of once each. Only creates outside a caller's transaction share
// (a GraphQL mutation's row belongs to its transaction); the caller still
// gets its own row, or its own error.

// sessionInsertsMax bounds the rows of one shared insert.
const sessionInsertsMax = 64

// sessionInsertTimeout bounds one shared insert; a create whose batch
// fails inserts alone with its own context.
const sessionInsertTimeout = 10 * time.Second

// errInsertAlone tells a create its batch did not write it: it inserts
// its row alone, which gives it its own answer (a reused idempotency key
// or an external-id collision in one row fails a whole multi-row insert,
// and must be answered to its create only).
var errInsertAlone = errors.New("insert alone")

// sessionInsert is one create's row waiting for the next shared insert.
type sessionInsert struct {
	create *ent.CheckoutSessionCreate
	sess   *ent.CheckoutSession
	err    error
	done   chan struct{}
}

func newSessionInserts(db *store.DB) *store.GroupBatch[*sessionInsert] {
	return store.NewGroupBatch(sessionInsertsMax, func(batch []*sessionInsert) {
		insertSessions(db, batch)
	})
}

// insertSession writes create's row with the creates waiting beside it and
// returns it as saved. create is built on the service's own client (not a
// transaction's).
func (s *Service) insertSession(ctx context.Context, create *ent.CheckoutSessionCreate) (*ent.CheckoutSession, error) {
	c := &sessionInsert{create: create, done: make(chan struct{})}
	s.sessionInserts.Submit(c)
	select {
	case <-c.done:
	case <-ctx.Done():
		// The batch may still write the row; the caller's answer is its
		// context's end, as for any insert whose context ends mid-way.
		return nil, ctx.Err()
	}
	if errors.Is(c.err, errInsertAlone) {
		return create.Save(ctx)
	}
	return c.sess, c.err
}

// insertSessions writes a batch's rows in one statement. A batch whose
// statement fails is handed back for each create to insert alone.
func insertSessions(db *store.DB, batch []*sessionInsert) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), sessionInsertTimeout)
	defer cancel()
	if len(batch) == 1 {
		// Written here, not handed back: the insert's time is what lets
		// the creates arriving meanwhile gather into the next batch.
		batch[0].sess, batch[0].err = batch[0].create.Save(ctx)
		return
	}
	creates := make([]*ent.CheckoutSessionCreate, len(batch))
	for i, c := range batch {
		creates[i] = c.create
	}
	saved, err := db.Ent.CheckoutSession.CreateBulk(creates...).Save(ctx)
	for i, c := range batch {
		if err != nil {
			c.err = errInsertAlone
			continue
		}
		c.sess = saved[i]
	}
}
