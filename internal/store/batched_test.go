package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// lengths is a batched statement answering each key with its length in
// characters, except "missing", which it leaves out; a row of "boom" fails
// the batch. genericPlan: on a connection of its own (PostgreSQL only).
func lengths(db *store.DB, genericPlan bool) *store.Batched[string, string, int] {
	query, args := `SELECT value, length(value) FROM json_each(?) WHERE value <> 'missing'`,
		func(keys []string) []any {
			b, _ := json.Marshal(keys)
			return []any{string(b)}
		}
	if db.IsPostgres() {
		query = `SELECT k, length(k) FROM unnest($1::text[]) AS t(k) WHERE k <> 'missing'`
		args = func(keys []string) []any { return []any{pq.StringArray(keys)} }
	}
	return store.NewBatched(store.BatchSpec[string, string, int]{
		SQL:  query,
		Args: args,
		Scan: func(rows *sql.Rows, answers map[string]int) error {
			var (
				k string
				n int
			)
			if err := rows.Scan(&k, &n); err != nil {
				return err
			}
			if k == "boom" {
				return errors.New("boom")
			}
			answers[k] = n
			return nil
		},
		Key:         func(k string) string { return k },
		Max:         16,
		Timeout:     10 * time.Second,
		GenericPlan: genericPlan,
	})
}

// callConcurrently asks b for every key at once, and for each key reports
// its answer (or fails the test).
func callConcurrently(t *testing.T, db *store.DB, b *store.Batched[string, string, int], keys []string) map[string]int {
	t.Helper()
	var (
		mu  sync.Mutex
		got = make(map[string]int, len(keys))
		wg  sync.WaitGroup
	)
	for _, k := range keys {
		wg.Go(func() {
			n, err := b.Do(context.Background(), db, k)
			if err != nil {
				t.Errorf("%s: %v", k, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			got[k] = n
		})
	}
	wg.Wait()
	return got
}

// TestBatchedAnswersEachCall: concurrent calls share statements, each
// answered by its own key, a key without a row by the zero value; an error
// answers every call of its batch; the runner counts calls and batches.
func TestBatchedAnswersEachCall(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	b := lengths(db, false)
	keys := []string{"missing"}
	want := map[string]int{"missing": 0}
	for i := range 100 {
		k := fmt.Sprintf("key-%d", i)
		keys = append(keys, k)
		want[k] = len(k)
	}
	require.Equal(t, want, callConcurrently(t, db, b, keys))
	calls, batches := b.Counts(db)
	require.Equal(t, int64(len(keys)), calls)
	require.GreaterOrEqual(t, batches, int64(len(keys)/16), "at most Max calls a batch")
	require.LessOrEqual(t, batches, calls)

	_, err := b.Do(context.Background(), db, "boom")
	require.EqualError(t, err, "boom")
	n, err := b.Do(context.Background(), db, "after")
	require.NoError(t, err, "the next batch runs as usual")
	require.Equal(t, 5, n)
}

// TestBatchedGenericPlanConnection: a GenericPlan statement is planned once
// on its own connection, never per execution, while the pool's connections
// keep PostgreSQL's default; a connection the server ends is replaced
// without failing a call, and closing the DB gives it back.
func TestBatchedGenericPlanConnection(t *testing.T) {
	if !testdb.IsPostgres() {
		t.Skip("PostgreSQL only: set TEST_DATABASE_URL")
	}
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)
	b := lengths(db, true)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	// Concurrent calls, so that batches of several sizes run.
	for range 5 {
		require.Len(t, callConcurrently(t, db, b, keys), len(keys))
	}

	plans := func() (generic, custom int64) {
		t.Helper()
		require.NoError(t, b.OnOwnConn(db, func(conn *sql.Conn) error {
			return conn.QueryRowContext(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
				WHERE statement = $1`, `SELECT k, length(k) FROM unnest($1::text[]) AS t(k) WHERE k <> 'missing'`).Scan(&generic, &custom)
		}), "the batches run on the statement's own connection")
		return generic, custom
	}
	generic, custom := plans()
	require.Zero(t, custom, "planned again on an execution")
	require.Positive(t, generic)

	var mode string
	require.NoError(t, db.SQL.QueryRowContext(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode, "the pool's connections keep the default")

	// The server ends the statement's session: the next calls still answer.
	var pid int
	require.NoError(t, b.OnOwnConn(db, func(conn *sql.Conn) error {
		return conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid)
	}))
	_, err := db.SQL.ExecContext(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
	require.NoError(t, err)
	require.Len(t, callConcurrently(t, db, b, keys), len(keys))
	require.Len(t, callConcurrently(t, db, b, keys), len(keys))
	generic, custom = plans()
	require.Zero(t, custom)
	require.Positive(t, generic)

	require.NoError(t, db.Close())
	require.Error(t, b.OnOwnConn(db, func(*sql.Conn) error { return nil }), "given back when the DB closes")
}
