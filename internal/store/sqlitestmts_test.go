package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// TestSQLiteKeepsStatementsCompiled: a SQLite connection compiles a query
// text once and runs it again from its cache, inside transactions too, and
// a cached statement answers exactly what the text run afresh would: when
// the same query runs again while its earlier rows are still read, after
// a statement failed, for a script of several statements, and past the
// cache's bound.
func TestSQLiteKeepsStatementsCompiled(t *testing.T) {
	t.Parallel()
	if testdb.IsPostgres() {
		t.Skip("the per-connection statement cache is SQLite's")
	}
	ctx := context.Background()
	db := testdb.OpenEmpty(t)
	conn, err := db.SQL.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()

	_, err = conn.ExecContext(ctx, `CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	require.NoError(t, err)
	before := store.ConnStatements(conn)
	require.GreaterOrEqual(t, before, 1, "the connection is a caching one")

	insert := `INSERT INTO kv (k, v) VALUES (?, ?)`
	for i := range 5 {
		_, err := conn.ExecContext(ctx, insert, i, fmt.Sprint("v", i))
		require.NoError(t, err)
	}
	require.Equal(t, before+1, store.ConnStatements(conn), "five runs of one text, one statement")

	// A failed run (the primary key taken) leaves the statement usable.
	_, err = conn.ExecContext(ctx, insert, 1, "again")
	require.ErrorContains(t, err, "UNIQUE")
	_, err = conn.ExecContext(ctx, insert, 5, "v5")
	require.NoError(t, err)

	// The same query inside its own rows' loop, in a transaction: the outer
	// rows keep their place, the inner runs answer their own arguments.
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	query := `SELECT k, v FROM kv WHERE k >= ? ORDER BY k`
	outer, err := tx.QueryContext(ctx, query, 0)
	require.NoError(t, err)
	var seen []string
	for outer.Next() {
		var k int
		var v string
		require.NoError(t, outer.Scan(&k, &v))
		seen = append(seen, v)
		require.LessOrEqual(t, len(seen), 6, "the outer rows went back to their start: %v", seen)
		inner, err := tx.QueryContext(ctx, query, k)
		require.NoError(t, err)
		require.True(t, inner.Next())
		var ik int
		var iv string
		require.NoError(t, inner.Scan(&ik, &iv))
		require.Equal(t, k, ik)
		require.Equal(t, v, iv)
		require.NoError(t, inner.Close())
	}
	require.NoError(t, outer.Err())
	require.NoError(t, outer.Close())
	require.Equal(t, []string{"v0", "v1", "v2", "v3", "v4", "v5"}, seen)
	_, err = tx.ExecContext(ctx, `UPDATE kv SET v = ? WHERE k = ?`, "changed", 0)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	var v string
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = ?`, 0).Scan(&v))
	require.Equal(t, "v0", v, "the rollback undid the cached statement's update")

	// A script of two statements, twice.
	script := `UPDATE kv SET v = v || '+' WHERE k = 1; UPDATE kv SET v = v || '+' WHERE k = 2`
	for range 2 {
		_, err := conn.ExecContext(ctx, script)
		require.NoError(t, err)
	}
	for k, want := range map[int]string{1: "v1++", 2: "v2++"} {
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = ?`, k).Scan(&v))
		require.Equal(t, want, v)
	}

	// Past the bound, texts run uncached and still answer.
	for i := range store.MaxConnStatements + 10 {
		var n int
		require.NoError(t, conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) + %d FROM kv`, i)).Scan(&n))
		require.Equal(t, 6+i, n)
	}
	require.Equal(t, store.MaxConnStatements, store.ConnStatements(conn))
}
