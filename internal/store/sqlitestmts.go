package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
	"sync"
)

// maxConnStatements bounds each SQLite connection's statement cache, as
// maxCachedStatements bounds the pool's: query texts that vary with their
// arguments (ent's IN lists) must not grow it forever.
const maxConnStatements = 512

// sqliteConnector opens SQLite connections that keep each query text they
// run compiled (cachingConn). Compiling SQL is most of what a small SQLite
// statement costs (BenchmarkInternalPayment's profile: 1.1 s of 3.0 s in
// sqlite3Prepare), and the pool's stmtCache only serves queries outside
// transactions, while a payment runs a dozen statements inside one. The
// cache is per connection, so it holds for transactions, River's queries
// and raw SQL alike; PostgreSQL is not wrapped (a statement prepared there
// is a round trip of its own, which stmtCache weighs for it).
type sqliteConnector struct{ driver.Connector }

func (c sqliteConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cachingConn{conn: conn, stmts: make(map[string]*connStmt)}, nil
}

// cachingConn runs a query text it has seen through the statement it
// compiled the first time. A statement whose rows are still open (a query
// run again while its earlier rows are read) is not shared: that run
// compiles the text anew, as without the cache. database/sql uses a
// connection from one goroutine at a time; mu guards against a Rows closed
// from another all the same.
type cachingConn struct {
	conn  driver.Conn
	mu    sync.Mutex
	stmts map[string]*connStmt
}

type connStmt struct {
	stmt driver.Stmt
	busy bool
}

var (
	_ driver.ConnBeginTx        = (*cachingConn)(nil)
	_ driver.ConnPrepareContext = (*cachingConn)(nil)
	_ driver.ExecerContext      = (*cachingConn)(nil)
	_ driver.QueryerContext     = (*cachingConn)(nil)
	_ driver.Pinger             = (*cachingConn)(nil)
	_ driver.SessionResetter    = (*cachingConn)(nil)
	_ driver.Validator          = (*cachingConn)(nil)
)

// Unwrap is the driver's connection (modernc.org/sqlite's Limit and others
// look through a wrapper with it).
func (c *cachingConn) Unwrap() driver.Conn { return c.conn }

// take returns the compiled statement of query, marked busy, or nil when
// it is busy, the cache is full or compiling fails (the caller then runs
// the query directly, which reports the error).
func (c *cachingConn) take(ctx context.Context, query string) *connStmt {
	c.mu.Lock()
	s, ok := c.stmts[query]
	if ok && !s.busy {
		s.busy = true
	} else if ok {
		s = nil
	}
	full := len(c.stmts) >= maxConnStatements
	c.mu.Unlock()
	if ok || full {
		return s
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if _, ok := st.(driver.StmtQueryContext); !ok {
		_ = st.Close()
		return nil
	}
	if _, ok := st.(driver.StmtExecContext); !ok {
		_ = st.Close()
		return nil
	}
	s = &connStmt{stmt: st, busy: true}
	c.mu.Lock()
	c.stmts[query] = s
	c.mu.Unlock()
	return s
}

func (c *cachingConn) release(s *connStmt) {
	c.mu.Lock()
	s.busy = false
	c.mu.Unlock()
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if s := c.take(ctx, query); s != nil {
		defer c.release(s)
		return s.stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	}
	return c.conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if s := c.take(ctx, query); s != nil {
		rows, err := s.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
		if err != nil {
			c.release(s)
			return nil, err
		}
		return &connRows{Rows: rows, release: func() { c.release(s) }}, nil
	}
	return c.conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) { return c.conn.Prepare(query) }

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// Close closes the compiled statements, then the connection.
func (c *cachingConn) Close() error {
	c.mu.Lock()
	stmts := c.stmts
	c.stmts = nil
	c.mu.Unlock()
	var errs []error
	for _, s := range stmts {
		errs = append(errs, s.stmt.Close())
	}
	errs = append(errs, c.conn.Close())
	return errors.Join(errs...)
}

//lint:ignore SA1019 driver.Conn requires Begin; database/sql calls BeginTx.
func (c *cachingConn) Begin() (driver.Tx, error) { return c.conn.Begin() }

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *cachingConn) Ping(ctx context.Context) error { return c.conn.(driver.Pinger).Ping(ctx) }

func (c *cachingConn) ResetSession(ctx context.Context) error {
	return c.conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *cachingConn) IsValid() bool { return c.conn.(driver.Validator).IsValid() }

// connRows are a cached statement's rows: closing them frees the
// statement for the next run. The column type methods are the driver's.
type connRows struct {
	driver.Rows
	release func()
}

func (r *connRows) Close() error {
	err := r.Rows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}

func (r *connRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *connRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *connRows) ColumnTypeNullable(i int) (bool, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *connRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *connRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
