package store

import (
	"context"
	"database/sql"
	"sync"

	"golang.org/x/sync/singleflight"
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
	db        *sql.DB
	preparing singleflight.Group
	mu        sync.RWMutex
	stmts     map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: make(map[string]*sql.Stmt)}
}

// QueryCached runs query outside any transaction through the pool's
// statement cache, the one ent's queries outside transactions use (directly
// on the pool for a DB not built by OpenDB).
func (db *DB) QueryCached(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if db.stmts == nil {
		return db.SQL.QueryContext(ctx, query, args...)
	}
	return db.stmts.QueryContext(ctx, query, args...)
}

// stmt returns the prepared statement of query, or nil when the cache is
// full or preparing fails (the caller then runs the query directly).
//
// Concurrent first uses of a query share one preparation, and c.mu is
// never held while a statement is prepared or closed: either can wait on a
// busy connection (a preparation waits for the locks its statement takes,
// and closing a statement waits for every connection it is prepared on),
// and holding c.mu meanwhile stalled every cached query of the pool.
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
	v, _, _ := c.preparing.Do(query, func() (any, error) {
		// A flight that ended since the read above has stored it.
		c.mu.RLock()
		st, ok := c.stmts[query]
		c.mu.RUnlock()
		if ok {
			return st, nil
		}
		st, err := c.db.PrepareContext(ctx, query)
		if err != nil {
			return (*sql.Stmt)(nil), nil
		}
		c.mu.Lock()
		stored := len(c.stmts) < maxCachedStatements
		if stored {
			c.stmts[query] = st
		}
		c.mu.Unlock()
		if !stored {
			go st.Close() //nolint:errcheck // the query runs unprepared instead
			return (*sql.Stmt)(nil), nil
		}
		return st, nil
	})
	return v.(*sql.Stmt)
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
	c.mu.Lock()
	stmts := c.stmts
	c.stmts = make(map[string]*sql.Stmt)
	c.mu.Unlock()
	for _, st := range stmts {
		_ = st.Close()
	}
}
