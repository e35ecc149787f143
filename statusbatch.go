package agentpay

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"time"

	"github.com/lib/pq"

	"agentpay/internal/store"
)

// statusBatchMax bounds the sessions one batched statement reads. One
// statement runs at a time per pool (store.GroupBatch), so every poll that
// arrives during a read joins the next one (a read never waits on a lock,
// so at most two reads' time); two at a time halved the batches and
// measured lower (BenchmarkCheckoutStatus).
const (
	statusBatchMax         = 256
	statusBatchReadTimeout = 10 * time.Second
)

// statusBatcher coalesces concurrent status reads into shared statements
// (store.GroupBatch). Every request is read by a statement that starts
// after it arrived, so an answer is never older than its request.
//
// The batched statement runs on a connection of the batcher's own, where it
// is prepared under plan_cache_mode = force_generic_plan. Left to its
// default, PostgreSQL plans it again on every execution: a plan for an
// array parameter of 6 elements is estimated cheaper than the generic plan
// (which assumes 10), so the generic one is never chosen, and planning
// cost more than running it (BenchmarkCheckoutStatus: 43-50% of the bare
// handler with a plan per execution, 58-60% with the generic plan). The
// setting stays on that connection: every other statement keeps the
// default.
type statusBatcher struct {
	db    *store.DB
	calls *store.GroupBatch[*statusCall]

	// connMu is held while conn is in use, and guards conn and stmt.
	connMu sync.Mutex
	conn   *sql.Conn
	stmt   *sql.Stmt
	closed bool
}

type statusCall struct {
	id   string
	done chan struct{}
	acc  *statusAcc
	err  error
}

// statusBatchers holds each DB's batcher, shared by every Service on it.
var statusBatchers = store.NewPerDB(newStatusBatcher, (*statusBatcher).close)

func newStatusBatcher(db *store.DB) *statusBatcher {
	b := &statusBatcher{db: db}
	b.calls = store.NewGroupBatch(statusBatchMax, b.serve)
	return b
}

// status reads a session's status rows; nil when there is no such session.
func (b *statusBatcher) status(ctx context.Context, externalID string) (*statusAcc, error) {
	c := &statusCall{id: externalID, done: make(chan struct{})}
	b.calls.Submit(c)
	select {
	case <-c.done:
		return c.acc, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serve reads a batch and answers its calls.
func (b *statusBatcher) serve(batch []*statusCall) {
	ctx, cancel := context.WithTimeout(context.Background(), statusBatchReadTimeout)
	err := b.read(ctx, batch)
	cancel()
	for _, c := range batch {
		if err != nil {
			c.acc, c.err = nil, err
		}
		close(c.done)
	}
}

// read runs one statement for the batch's sessions and sets each call's acc.
func (b *statusBatcher) read(ctx context.Context, batch []*statusCall) error {
	ids := make([]string, len(batch))
	for i, c := range batch {
		ids[i] = c.id
	}
	// The rows are read on the batcher's connection: it is not used again
	// until they are closed.
	b.connMu.Lock()
	defer b.connMu.Unlock()
	rows, err := b.queryLocked(ctx, pq.StringArray(ids))
	if err != nil {
		return err
	}
	defer rows.Close()
	found := make(map[string]*statusAcc, len(batch))
	for rows.Next() {
		var (
			id string
			r  statusRow
		)
		if err := rows.Scan(&id, &r.status, &r.chain, &r.token, &r.livemode, &r.merchantID, &r.amount, &r.confs, &r.pStatus); err != nil {
			return err
		}
		acc := found[id]
		if acc == nil {
			acc = new(statusAcc)
			found[id] = acc
		}
		acc.add(&r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range batch {
		c.acc = found[c.id]
	}
	return nil
}

// queryLocked runs the batched statement on the batcher's connection,
// opening it first if need be; when it cannot be opened, on the pool
// (b.connMu held).
func (b *statusBatcher) queryLocked(ctx context.Context, ids pq.StringArray) (*sql.Rows, error) {
	if b.stmt == nil && !b.closed {
		if err := b.connectLocked(ctx); err != nil {
			return b.db.QueryCached(ctx, checkoutStatusBatchQuery, ids)
		}
	}
	if b.stmt == nil {
		return b.db.QueryCached(ctx, checkoutStatusBatchQuery, ids)
	}
	rows, err := b.stmt.QueryContext(ctx, ids)
	if err != nil && ctx.Err() == nil {
		// The connection may be broken (the server restarted, or ended the
		// session): the pool, which replaces bad connections, answers this
		// batch, and the next one opens another connection.
		b.disconnectLocked()
		return b.db.QueryCached(ctx, checkoutStatusBatchQuery, ids)
	}
	return rows, err
}

// connectLocked takes a connection out of the pool for the batched
// statement (b.connMu held).
func (b *statusBatcher) connectLocked(ctx context.Context) error {
	conn, err := b.db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		_ = conn.Close()
		return err
	}
	stmt, err := conn.PrepareContext(ctx, checkoutStatusBatchQuery)
	if err != nil {
		_ = conn.Close()
		return err
	}
	b.conn, b.stmt = conn, stmt
	return nil
}

func (b *statusBatcher) disconnectLocked() {
	if b.stmt != nil {
		_ = b.stmt.Close()
	}
	if b.conn != nil {
		// Raw discards the connection instead of returning it to the pool
		// with the setting still on.
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = b.conn.Close()
	}
	b.conn, b.stmt = nil, nil
}

// close gives back the batcher's connection; the pool is closing.
func (b *statusBatcher) close() {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	b.closed = true
	b.disconnectLocked()
}
