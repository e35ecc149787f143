package agentpay

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"agentpay/internal/store"
	"agentpay/internal/testdb/freshdb"
)

// openTestDB returns a new migrated database for a root-package test: SQLite
// in t.TempDir(), or a fresh PostgreSQL database when TEST_DATABASE_URL is
// set. (Tests in other packages use internal/testdb.Open.)
func openTestDB(tb testing.TB) *store.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := store.OpenDB(ctx, store.DBConfig{URL: freshdb.URL(tb)})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	_, err = db.Migrate(ctx, nil)
	require.NoError(tb, err)
	return db
}

// reopenTestDB opens another pool on db's database, as another process
// would.
func reopenTestDB(tb testing.TB, db *store.DB) *store.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := store.OpenDB(ctx, store.DBConfig{URL: db.URL})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = other.Close() })
	return other
}

// newInsertOnlyRiver is a River client that only inserts (no queues, no
// workers), the way the API processes use River.
func newInsertOnlyRiver(t *testing.T, db *store.DB) *river.Client[*sql.Tx] {
	t.Helper()
	client, err := river.NewClient(db.RiverDriver(), &river.Config{})
	require.NoError(t, err)
	return client
}

func countRows(t *testing.T, db *store.DB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}
