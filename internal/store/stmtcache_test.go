package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/testdb/freshdb"
)

func TestStmtCachePreparesOnceAndStaysBounded(t *testing.T) {
	ctx := context.Background()
	db, err := OpenDB(ctx, DBConfig{URL: freshdb.URL(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	c := newStmtCache(db.SQL)
	t.Cleanup(c.close)

	one := func(query string, want int) {
		t.Helper()
		rows, err := c.QueryContext(ctx, query)
		require.NoError(t, err)
		defer rows.Close()
		require.True(t, rows.Next())
		var got int
		require.NoError(t, rows.Scan(&got))
		require.Equal(t, want, got)
	}
	one("SELECT 1", 1)
	one("SELECT 1", 1)
	require.Len(t, c.stmts, 1, "the same text is prepared once")

	for i := range maxCachedStatements + 50 {
		one(fmt.Sprintf("SELECT %d", i+2), i+2)
	}
	require.Len(t, c.stmts, maxCachedStatements, "a full cache runs new queries unprepared")

	_, err = c.ExecContext(ctx, "SELECT nonsense FROM nowhere")
	require.Error(t, err, "a query that cannot be prepared still reports its own error")
}

// TestStmtCacheSharesAFirstPreparation: queries that first arrive together
// share one preparation, so no duplicate is made and closed. Closing a
// duplicate waited on every connection the statement was prepared on, and
// one connection busy preparing a statement blocked by a lock stalled every
// cached query of the pool.
func TestStmtCacheSharesAFirstPreparation(t *testing.T) {
	const query = "SELECT 41 + 1"
	var (
		mu        sync.Mutex
		prepares  int
		secondArr = make(chan struct{})
	)
	// A first preparation waits (up to a bound) for a second one to reach
	// the driver, so that without sharing two always do.
	db := openPrepareWatchingSQLite(t, func(q string) {
		if q != query {
			return
		}
		mu.Lock()
		prepares++
		if prepares == 2 {
			close(secondArr)
		}
		mu.Unlock()
		select {
		case <-secondArr:
		case <-time.After(300 * time.Millisecond):
		}
	})
	c := newStmtCache(db)
	t.Cleanup(c.close)

	const callers = 8
	got := make([]*sql.Stmt, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.stmt(context.Background(), query)
		}()
	}
	wg.Wait()
	mu.Lock()
	require.Equal(t, 1, prepares, "one preparation for callers that arrived together")
	mu.Unlock()
	for _, st := range got {
		require.NotNil(t, st)
		require.Same(t, got[0], st)
	}
	var answer int
	require.NoError(t, got[0].QueryRowContext(context.Background()).Scan(&answer))
	require.Equal(t, 42, answer)
}

// openPrepareWatchingSQLite opens an in-memory SQLite pool of several
// connections whose driver calls onPrepare before each preparation.
func openPrepareWatchingSQLite(t *testing.T, onPrepare func(query string)) *sql.DB {
	t.Helper()
	plain, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	d := plain.Driver()
	require.NoError(t, plain.Close())
	db := sql.OpenDB(prepareWatchingConnector{driver: d, onPrepare: onPrepare})
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	return db
}

type prepareWatchingConnector struct {
	driver    driver.Driver
	onPrepare func(query string)
}

func (c prepareWatchingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(":memory:")
	if err != nil {
		return nil, err
	}
	return prepareWatchingConn{Conn: conn, onPrepare: c.onPrepare}, nil
}

func (c prepareWatchingConnector) Driver() driver.Driver { return c.driver }

// prepareWatchingConn exposes only driver.Conn's methods, so database/sql
// prepares through Prepare.
type prepareWatchingConn struct {
	driver.Conn
	onPrepare func(query string)
}

func (c prepareWatchingConn) Prepare(query string) (driver.Stmt, error) {
	c.onPrepare(query)
	return c.Conn.Prepare(query)
}
