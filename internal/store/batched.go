package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"time"
)

// Batched is one statement run for many concurrent calls, a batch of them
// at a time (see the package doc): every call is answered by a statement
// that started after it arrived, so a read is never older than its call,
// and a write's batch commits once. A DB has one runner per Batched, shared
// by every Service on it, made on first use and released by DB.Close
// (PerDB).
type Batched[K comparable, In, Out any] struct {
	spec    BatchSpec[K, In, Out]
	runners *PerDB[*batchRunner[K, In, Out]]
}

// BatchSpec says what a Batched statement is and how calls map to it.
type BatchSpec[K comparable, In, Out any] struct {
	// SQL is the statement; Args makes its arguments from a batch's inputs
	// (arrays, one element per call, on PostgreSQL).
	SQL  string
	Args func(batch []In) []any
	// Scan reads the current row into the answers, by key.
	Scan func(rows *sql.Rows, answers map[K]Out) error
	// Key is the key of a call's answer; a call whose key has no answer
	// gets the zero Out.
	Key func(In) K
	// Max bounds the calls of one batch; Timeout one batch's statement.
	Max     int
	Timeout time.Duration
	// GenericPlan runs the statement on a connection of its own, prepared
	// there under plan_cache_mode = force_generic_plan (PostgreSQL), for a
	// statement PostgreSQL would otherwise plan again on every execution
	// (an array parameter of a few elements is estimated cheaper with a
	// custom plan than with the generic one, which assumes 10, so the
	// generic plan is never chosen, and planning can cost more than
	// running it). The setting stays on that connection: every other
	// statement keeps the default. Without, the statement runs on the pool
	// through its statement cache (QueryCached).
	GenericPlan bool
}

// NewBatched returns the batched statement of spec.
func NewBatched[K comparable, In, Out any](spec BatchSpec[K, In, Out]) *Batched[K, In, Out] {
	b := &Batched[K, In, Out]{spec: spec}
	var release func(*batchRunner[K, In, Out])
	if spec.GenericPlan {
		release = (*batchRunner[K, In, Out]).close
	}
	b.runners = NewPerDB(b.newRunner, release)
	return b
}

// Do runs in with the next batch on db and returns its answer once the
// batch has run. When ctx ends first Do returns ctx's error; the batch may
// still run in (and a write commit it).
func (b *Batched[K, In, Out]) Do(ctx context.Context, db *DB, in In) (Out, error) {
	c := &batchCall[In, Out]{in: in, done: make(chan struct{})}
	b.runners.For(db).calls.Submit(c)
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// Counts reports how many calls db's runner has been given and how many
// batches (statements) it has started (tests).
func (b *Batched[K, In, Out]) Counts(db *DB) (calls, batches int64) {
	return b.runners.For(db).calls.Counts()
}

type batchCall[In, Out any] struct {
	in   In
	done chan struct{}
	out  Out
	err  error
}

// batchRunner runs a Batched statement's batches on one DB.
type batchRunner[K comparable, In, Out any] struct {
	spec  *BatchSpec[K, In, Out]
	db    *DB
	calls *GroupBatch[*batchCall[In, Out]]
	// conn is the statement's own connection (GenericPlan); nil: the pool.
	conn *planConn
}

func (b *Batched[K, In, Out]) newRunner(db *DB) *batchRunner[K, In, Out] {
	r := &batchRunner[K, In, Out]{spec: &b.spec, db: db}
	if b.spec.GenericPlan {
		r.conn = &planConn{}
	}
	r.calls = NewGroupBatch(b.spec.Max, r.serve)
	return r
}

// serve runs a batch and answers its calls.
func (r *batchRunner[K, In, Out]) serve(batch []*batchCall[In, Out]) {
	ctx, cancel := context.WithTimeout(context.Background(), r.spec.Timeout)
	answers, err := r.run(ctx, batch)
	cancel()
	for _, c := range batch {
		if err == nil {
			c.out = answers[r.spec.Key(c.in)]
		}
		c.err = err
		close(c.done)
	}
}

// run runs the statement for the batch and reads its answers.
func (r *batchRunner[K, In, Out]) run(ctx context.Context, batch []*batchCall[In, Out]) (map[K]Out, error) {
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	args := r.spec.Args(ins)
	var (
		rows *sql.Rows
		err  error
	)
	if r.conn != nil {
		// The rows are read on the runner's connection: it is not used
		// again until they are closed.
		r.conn.mu.Lock()
		defer r.conn.mu.Unlock()
		rows, err = r.conn.queryLocked(ctx, r.db, r.spec.SQL, args)
	} else {
		rows, err = r.db.QueryCached(ctx, r.spec.SQL, args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	answers := make(map[K]Out, len(batch))
	for rows.Next() {
		if err := r.spec.Scan(rows, answers); err != nil {
			return nil, err
		}
	}
	return answers, rows.Err()
}

// close gives back the runner's connection; the pool is closing.
func (r *batchRunner[K, In, Out]) close() {
	r.conn.close()
}

// planConn is a connection taken out of the pool for one statement,
// prepared on it under plan_cache_mode = force_generic_plan
// (BatchSpec.GenericPlan).
type planConn struct {
	// mu is held while conn is in use, and guards conn and stmt.
	mu     sync.Mutex
	conn   *sql.Conn
	stmt   *sql.Stmt
	closed bool
}

// queryLocked runs query on the connection, opening it first if need be;
// when it cannot be opened, on db's pool (c.mu held).
func (c *planConn) queryLocked(ctx context.Context, db *DB, query string, args []any) (*sql.Rows, error) {
	if c.stmt == nil && !c.closed {
		if err := c.connectLocked(ctx, db, query); err != nil {
			return db.QueryCached(ctx, query, args...)
		}
	}
	if c.stmt == nil {
		return db.QueryCached(ctx, query, args...)
	}
	rows, err := c.stmt.QueryContext(ctx, args...)
	if err != nil && ctx.Err() == nil {
		// The connection may be broken (the server restarted, or ended the
		// session): the pool, which replaces bad connections, answers this
		// batch, and the next one opens another connection.
		c.disconnectLocked()
		return db.QueryCached(ctx, query, args...)
	}
	return rows, err
}

// connectLocked takes a connection out of db's pool and prepares query on
// it (c.mu held).
func (c *planConn) connectLocked(ctx context.Context, db *DB, query string) error {
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		_ = conn.Close()
		return err
	}
	stmt, err := conn.PrepareContext(ctx, query)
	if err != nil {
		_ = conn.Close()
		return err
	}
	c.conn, c.stmt = conn, stmt
	return nil
}

func (c *planConn) disconnectLocked() {
	if c.stmt != nil {
		_ = c.stmt.Close()
	}
	if c.conn != nil {
		// Raw discards the connection instead of returning it to the pool
		// with the setting still on.
		_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.conn.Close()
	}
	c.conn, c.stmt = nil, nil
}

// close gives the connection back for good.
func (c *planConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.disconnectLocked()
}
