package agentpay

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStatements bounds the cache: ent builds queries whose text varies
// with their arguments (IN lists), and those must not grow it forever.
const maxCachedStatements = 512

// stmtCache runs each distinct query text as a prepared statement, prepared
// once per pool. On PostgreSQL a prepared statement costs one round trip
// instead of two (lib/pq parses, then binds and executes); on SQLite it
// skips compiling the SQL again. Transactions bypass it (see
// txSharingDriver), so it only serves the many small reads outside them.
type stmtCache struct {
	db    *sql.DB
	mu    sync.RWMutex
	stmts map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	c := &stmtCache{db: db, stmts: make(map[string]*sql.Stmt)}
	poolStmtCaches.LoadOrStore(db, c)
	return c
}

// poolStmtCaches maps each open pool to its statement cache (the first one
// made for it: the ent driver's), so raw SQL of the service outside
// transactions shares the cache (see queryCached).
var poolStmtCaches sync.Map // *sql.DB -> *stmtCache

// queryCached runs query on db, outside any transaction, through db's
// statement cache (directly when db has none).
func queryCached(ctx context.Context, db *sql.DB, query string, args ...any) (*sql.Rows, error) {
	if c, ok := poolStmtCaches.Load(db); ok {
		return c.(*stmtCache).QueryContext(ctx, query, args...)
	}
	return db.QueryContext(ctx, query, args...)
}

// stmt returns the prepared statement of query, or nil when the cache is
// full or preparing fails (the caller then runs the query directly).
func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.stmts[query]
	full := len(c.stmts) >= maxCachedStatements
	c.mu.RUnlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok {
		_ = st.Close()
		return prev
	}
	if len(c.stmts) >= maxCachedStatements {
		_ = st.Close()
		return nil
	}
	c.stmts[query] = st
	return st
}

func (c *stmtCache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.db.ExecContext(ctx, query, args...)
}

func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

func (c *stmtCache) close() {
	poolStmtCaches.CompareAndDelete(c.db, c)
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		_ = st.Close()
		delete(c.stmts, q)
	}
}
