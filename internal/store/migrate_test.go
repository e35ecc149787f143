package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/stretchr/testify/require"

	entmigrate "agentpay/ent/migrate"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

func TestMigrationsEmbeddedAndSummed(t *testing.T) {
	t.Parallel()

	for _, d := range []string{store.DialectSQLite, store.DialectPostgres} {
		migrations, err := store.Migrations(d)
		require.NoError(t, err, d)
		require.NotEmpty(t, migrations, d)
		for i := 1; i < len(migrations); i++ {
			require.Less(t, migrations[i-1].Version, migrations[i].Version, d)
		}
	}
	// Both engines must have the same history, so a change never exists on
	// only one of them.
	sqlite, _ := store.Migrations(store.DialectSQLite)
	postgres, _ := store.Migrations(store.DialectPostgres)
	require.Equal(t, len(sqlite), len(postgres))
	for i := range sqlite {
		require.Equal(t, sqlite[i].Name, postgres[i].Name)
	}
}

func TestMigrateFromEmptyIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	db := testdb.OpenEmpty(t)

	res, err := db.Migrate(ctx, nil)
	require.NoError(t, err)
	all, err := store.Migrations(db.Dialect)
	require.NoError(t, err)
	require.Len(t, res.Applied, len(all))
	require.NotEmpty(t, res.RiverVersions)

	before := dumpSchema(t, db)
	require.Contains(t, before, "table agents")
	require.Contains(t, before, "table river_job")
	require.Contains(t, before, "table "+store.SchemaMigrationsTable)
	bookkeeping := dumpMigrationTable(t, db)

	res, err = db.Migrate(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Empty(t, res.RiverVersions)
	require.Equal(t, before, dumpSchema(t, db))
	require.Equal(t, bookkeeping, dumpMigrationTable(t, db))
}

// TestEntSchemaMatchesMigrations inspects the migrated database and diffs it
// against the ent schema: a schema change without a regenerated migration
// fails here.
func TestEntSchemaMatchesMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	db := testdb.Open(t)

	dir := &atlasmigrate.MemDir{}
	m, err := schema.NewMigrate(entsql.OpenDB(db.Dialect, db.SQL),
		schema.WithDir(dir),
		schema.WithDialect(db.Dialect),
		schema.WithMigrationMode(schema.ModeInspect),
		schema.WithDropColumn(true),
		schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
	)
	require.NoError(t, err)
	err = m.NamedDiff(ctx, "drift", entmigrate.Tables...)
	if !errors.Is(err, atlasmigrate.ErrNoPlan) {
		require.NoError(t, err)
		files, _ := dir.Files()
		var b strings.Builder
		for _, f := range files {
			b.Write(f.Bytes())
		}
		t.Fatalf("ent schema and migrations differ; run `go run ./ent/migrate/gen -name <change>`. Pending changes:\n%s", b.String())
	}
}

// dumpSchema describes every table, column and index of the database.
func dumpSchema(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	var query string
	if db.IsPostgres() {
		query = `
SELECT 'table ' || c.table_name || ' ' || c.column_name || ' ' || c.data_type || ' ' || c.is_nullable || ' ' || coalesce(c.column_default, '')
FROM information_schema.columns c WHERE c.table_schema = current_schema()
UNION ALL
SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
ORDER BY 1`
	} else {
		query = `SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY 1`
	}
	rows, err := db.SQL.QueryContext(ctx, query)
	require.NoError(t, err)
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		b.WriteString(line)
		b.WriteByte('\n')
	}
	require.NoError(t, rows.Err())
	return b.String()
}

func dumpMigrationTable(t *testing.T, db *store.DB) string {
	t.Helper()
	rows, err := db.SQL.QueryContext(context.Background(),
		"SELECT version, name, checksum, applied_at FROM "+store.SchemaMigrationsTable+" ORDER BY version")
	require.NoError(t, err)
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var version, name, checksum string
		var appliedAt any
		require.NoError(t, rows.Scan(&version, &name, &checksum, &appliedAt))
		fmt.Fprintf(&b, "%s %s %s %v\n", version, name, checksum, appliedAt)
	}
	require.NoError(t, rows.Err())
	return b.String()
}

// TestMigrateConcurrently: several processes starting at once (N serve + M
// worker on PostgreSQL) all call Migrate; each must succeed and the schema be
// applied once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	first := testdb.OpenEmpty(t)
	dbs := []*store.DB{first, testdb.Reopen(t, first), testdb.Reopen(t, first)}
	processes := len(dbs)

	results := make([]*store.MigrateResult, processes)
	errs := make([]error, processes)
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			results[i], errs[i] = db.Migrate(ctx, nil)
		})
	}
	wg.Wait()

	applied := 0
	for i := range dbs {
		require.NoError(t, errs[i])
		applied += len(results[i].Applied)
	}
	all, err := store.Migrations(dbs[0].Dialect)
	require.NoError(t, err)
	require.Equal(t, len(all), applied)
}
