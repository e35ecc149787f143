// Package testdb gives each test its own migrated agentpay database: SQLite
// in t.TempDir() by default, PostgreSQL when TEST_DATABASE_URL is set (see
// freshdb).
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"

	"agentpay/internal/store"
	"agentpay/internal/testdb/freshdb"
)

// Open returns a new, migrated database (our schema and River's), closed and
// dropped when the test ends.
//
// On PostgreSQL the database is copied from a migrated template database
// (agentpay_tmpl_<fingerprint of the migrations>), built once and reused by
// every test binary and run until the migrations change. Old templates are
// harmless; drop them at will.
func Open(tb testing.TB) *store.DB {
	tb.Helper()
	if freshdb.IsPostgres() {
		template, err := postgresTemplate(tb)
		if err != nil {
			tb.Fatalf("testdb: %v", err)
		}
		return open(tb, freshdb.URLFromTemplate(tb, template))
	}
	db := open(tb, freshdb.URL(tb))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.Migrate(ctx, nil); err != nil {
		tb.Fatalf("testdb: migrating: %v", err)
	}
	return db
}

// OpenEmpty returns a new database with no schema at all.
func OpenEmpty(tb testing.TB) *store.DB {
	tb.Helper()
	return open(tb, freshdb.URL(tb))
}

// Reopen returns another pool on db's database, as a second process would
// open it: nothing in memory is shared with db.
func Reopen(tb testing.TB, db *store.DB) *store.DB {
	tb.Helper()
	return open(tb, db.URL)
}

// IsPostgres reports whether tests run on PostgreSQL (TEST_DATABASE_URL set).
func IsPostgres() bool { return freshdb.IsPostgres() }

// InsertOnlyRiver returns a River client on db that only inserts jobs (no
// queues, no workers), the way the API processes use River.
func InsertOnlyRiver(tb testing.TB, db *store.DB) *river.Client[*sql.Tx] {
	tb.Helper()
	client, err := river.NewClient(db.RiverDriver(), &river.Config{})
	if err != nil {
		tb.Fatalf("testdb: river client: %v", err)
	}
	return client
}

// CountRows returns SELECT count(*) FROM from: a table, and any clause
// after it ("river_job WHERE kind = 'x'").
func CountRows(tb testing.TB, db *store.DB, from string) int {
	tb.Helper()
	var n int
	if err := db.SQL.QueryRowContext(context.Background(), "SELECT count(*) FROM "+from).Scan(&n); err != nil {
		tb.Fatalf("testdb: counting %s: %v", from, err)
	}
	return n
}

func open(tb testing.TB, url string) *store.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.OpenDB(ctx, store.DBConfig{URL: url})
	if err != nil {
		tb.Fatalf("testdb: opening %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// templateLockID serialises template builds across test binaries running in
// parallel ("agtmpl" in ASCII).
const templateLockID int64 = 0x6167746d706c

var (
	templateMu   sync.Mutex
	templateName string
)

// postgresTemplate returns the name of the migrated template database,
// building it if no test binary has yet.
func postgresTemplate(tb testing.TB) (string, error) {
	tb.Helper()
	templateMu.Lock()
	defer templateMu.Unlock()
	if templateName != "" {
		return templateName, nil
	}

	fingerprint, err := migrationsFingerprint()
	if err != nil {
		return "", err
	}
	name := "agentpay_tmpl_" + fingerprint

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := freshdb.Admin()
	if err != nil {
		return "", err
	}
	// Advisory locks belong to a session: pin one connection.
	conn, err := admin.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", templateLockID); err != nil {
		return "", err
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockID)
	}()

	var exists bool
	if err := conn.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		// Build under a temporary name and rename when complete, so a build
		// killed half-way never leaves a template that looks finished.
		suffix := make([]byte, 4)
		_, _ = rand.Read(suffix)
		building := name + "_b" + hex.EncodeToString(suffix)
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+building+" TEMPLATE template0"); err != nil {
			return "", fmt.Errorf("creating template database: %w", err)
		}
		if err := migrateTemplate(ctx, freshdb.DatabaseURL(tb, building)); err != nil {
			_, _ = conn.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
			return "", fmt.Errorf("migrating template database: %w", err)
		}
		if _, err := conn.ExecContext(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
			_, _ = conn.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
			return "", fmt.Errorf("publishing template database: %w", err)
		}
	}
	templateName = name
	return name, nil
}

func migrateTemplate(ctx context.Context, url string) error {
	db, err := store.OpenDB(ctx, store.DBConfig{URL: url})
	if err != nil {
		return err
	}
	// Closed before use as a template: PostgreSQL refuses to copy a database
	// that has connections.
	defer db.Close()
	_, err = db.Migrate(ctx, nil)
	return err
}

// migrationsFingerprint changes whenever our migrations or River's do.
func migrationsFingerprint() (string, error) {
	migrations, err := store.Migrations(store.DialectPostgres)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migrations {
		fmt.Fprintf(h, "%s\n", m.Name)
		h.Write(m.SQL)
	}
	riverMigrator, err := rivermigrate.New(riverdatabasesql.New(nil), nil)
	if err != nil {
		return "", err
	}
	for _, m := range riverMigrator.AllVersions() {
		fmt.Fprintf(h, "river %d %s\n", m.Version, m.SQLUp)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
