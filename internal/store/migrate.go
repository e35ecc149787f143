package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strings"
	"time"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	"github.com/riverqueue/river/rivermigrate"

	"agentpay/migrations"
)

// schemaMigrationsTable records which of our migration files are applied.
// River keeps its own bookkeeping (river_migration).
const schemaMigrationsTable = "schema_migrations"

// migrationLockID is the PostgreSQL advisory lock taken while migrating, so
// several processes started at once (N serve + M worker) migrate one at a
// time. The value is "agentpay" in ASCII.
const migrationLockID int64 = 0x6167656e74706179

// MigrateConfig configures DB.Migrate.
type MigrateConfig struct {
	// Logger receives one line per applied migration. Default: discard.
	Logger *slog.Logger
}

// MigrateResult says what a Migrate call changed; both fields are empty when
// the database was already up to date.
type MigrateResult struct {
	// Applied are the names of our migration files applied by this call.
	Applied []string
	// RiverVersions are River's migration versions applied by this call.
	RiverVersions []int
}

// Migration is one embedded schema migration file.
type Migration struct {
	Version string // e.g. "20261125221741"
	Name    string // file name, e.g. "20261125221741_init.sql"
	SQL     []byte
}

// Migrations returns the embedded migration files for a dialect, in the order
// they apply.
func Migrations(dialect string) ([]Migration, error) {
	dir, err := migrationsDir(dialect)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(migrations.FS, dir)
	if err != nil {
		return nil, err
	}
	var (
		list  []Migration
		files []atlasmigrate.File
	)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		data, err := migrations.FS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		version, _, _ := strings.Cut(e.Name(), "_")
		list = append(list, Migration{Version: version, Name: e.Name(), SQL: data})
		files = append(files, atlasmigrate.NewLocalFile(e.Name(), data))
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })

	// atlas.sum catches a migration edited by hand, or a file added without
	// the generator: either would make databases diverge silently.
	sum, err := atlasmigrate.NewHashFile(files)
	if err != nil {
		return nil, err
	}
	want, err := sum.MarshalText()
	if err != nil {
		return nil, err
	}
	got, err := migrations.FS.ReadFile(path.Join(dir, atlasmigrate.HashFileName))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(got)) {
		return nil, fmt.Errorf("agentpay: migrations/%s/atlas.sum does not match the migration files; regenerate them with the generator, never edit by hand", dir)
	}
	return list, nil
}

func migrationsDir(dialect string) (string, error) {
	switch dialect {
	case DialectPostgres:
		return "postgres", nil
	case DialectSQLite:
		return "sqlite", nil
	}
	return "", fmt.Errorf("agentpay: no migrations for dialect %q", dialect)
}

// Migrate is db.Migrate without logging, for callers that only need to know
// whether it worked.
func Migrate(ctx context.Context, db *DB) error {
	_, err := db.Migrate(ctx, nil)
	return err
}

// Migrate brings the database schema up to date: first our migrations, each
// file in its own transaction and recorded in schema_migrations, then River's
// (river_job, river_queue, ...). Applying it to an up-to-date database changes
// nothing, so every process may call it at start.
func (db *DB) Migrate(ctx context.Context, cfg *MigrateConfig) (*MigrateResult, error) {
	if cfg == nil {
		cfg = &MigrateConfig{}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	migrations, err := Migrations(db.Dialect)
	if err != nil {
		return nil, err
	}

	res := &MigrateResult{}

	// One pinned connection: the advisory lock (PostgreSQL) and the
	// foreign_keys pragma (SQLite) are per connection.
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	connReleased := false
	releaseConn := func() {
		if !connReleased {
			connReleased = true
			conn.Close()
		}
	}
	defer releaseConn()

	if db.IsPostgres() {
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockID); err != nil {
			return nil, fmt.Errorf("agentpay: taking the migration lock: %w", err)
		}
		defer func() {
			// Best effort: the lock also goes when the connection closes.
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockID)
		}()
	}

	if err := createMigrationsTable(ctx, conn); err != nil {
		return nil, err
	}

	for _, m := range migrations {
		applied, err := db.applyMigration(ctx, conn, m)
		if err != nil {
			return res, fmt.Errorf("agentpay: migration %s: %w", m.Name, err)
		}
		if applied {
			logger.InfoContext(ctx, "applied migration", slog.String("migration", m.Name))
			res.Applied = append(res.Applied, m.Name)
		}
	}

	// River's migrator uses the pool; on SQLite that pool is the one
	// connection we hold.
	if !db.IsPostgres() {
		releaseConn()
	}
	versions, err := db.migrateRiver(ctx, logger)
	if err != nil {
		return res, err
	}
	res.RiverVersions = versions
	return res, nil
}

// createMigrationsTable makes the table that records applied migrations.
func createMigrationsTable(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+schemaMigrationsTable+` (
	version    varchar(64) NOT NULL PRIMARY KEY,
	name       varchar(255) NOT NULL,
	checksum   varchar(64) NOT NULL,
	applied_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP
)`); err != nil {
		return fmt.Errorf("agentpay: creating %s: %w", schemaMigrationsTable, err)
	}
	return nil
}

// applyMigration applies one file unless schema_migrations already lists it.
// The check runs inside the transaction, so two SQLite processes (whose
// transactions take the write lock at BEGIN) cannot both apply it.
func (db *DB) applyMigration(ctx context.Context, conn *sql.Conn, m Migration) (applied bool, err error) {
	stmts, err := atlasmigrate.NewLocalFile(m.Name, m.SQL).Stmts()
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(m.SQL)
	checksum := hex.EncodeToString(sum[:])

	// SQLite ignores PRAGMA foreign_keys inside a transaction, yet atlas's
	// table rebuilds (ALTER of a column) depend on it being off. So turn it off
	// around the transaction and run foreign_key_check before committing, as
	// SQLite's documented ALTER procedure does.
	sqliteFKOff := !db.IsPostgres() && containsFKOff(stmts)
	if sqliteFKOff {
		if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = off"); err != nil {
			return false, err
		}
		defer func() {
			if _, onErr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = on"); onErr != nil && err == nil {
				err = onErr
			}
		}()
	}

	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()

	var stored string
	err = tx.QueryRowContext(ctx, db.rebind("SELECT checksum FROM "+schemaMigrationsTable+" WHERE version = ?"), m.Version).Scan(&stored)
	switch {
	case err == nil:
		if stored != checksum {
			return false, fmt.Errorf("already applied with a different content (checksum %s, file %s): migrations must never change once applied", stored, checksum)
		}
		return false, tx.Rollback()
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}

	for _, stmt := range stmts {
		if sqliteFKOff && isFKPragma(stmt) {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return false, fmt.Errorf("executing %q: %w", firstLine(stmt), err)
		}
	}
	if sqliteFKOff {
		rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
		if err != nil {
			return false, err
		}
		violation := rows.Next()
		rows.Close()
		if violation {
			return false, errors.New("foreign key violations after the migration")
		}
	}
	if _, err := tx.ExecContext(ctx,
		db.rebind("INSERT INTO "+schemaMigrationsTable+" (version, name, checksum) VALUES (?, ?, ?)"),
		m.Version, m.Name, checksum); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}

func (db *DB) migrateRiver(ctx context.Context, logger *slog.Logger) ([]int, error) {
	m, err := rivermigrate.New(db.RiverDriver(), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, err
	}
	var res *rivermigrate.MigrateResult
	// On SQLite, River reads the applied versions before its per-version
	// transactions, so two processes migrating one file at once can both try
	// a version; the loser fails with "already exists". Each version commits
	// together with its bookkeeping row, so trying again simply skips what
	// the other process applied. (On PostgreSQL our advisory lock, still held,
	// serialises whole runs.)
	for attempt := 1; ; attempt++ {
		res, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err == nil || db.IsPostgres() || attempt == 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("agentpay: river migrations: %w", err)
	}
	var versions []int
	for _, v := range res.Versions {
		logger.InfoContext(ctx, "applied river migration", slog.Int("version", v.Version), slog.String("name", v.Name))
		versions = append(versions, v.Version)
	}
	return versions, nil
}

// rebind turns ? placeholders into $n on PostgreSQL.
func (db *DB) rebind(query string) string {
	if !db.IsPostgres() {
		return query
	}
	var (
		b strings.Builder
		n int
	)
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func containsFKOff(stmts []string) bool {
	for _, s := range stmts {
		if isFKPragma(s) && strings.Contains(strings.ToLower(s), "off") {
			return true
		}
	}
	return false
}

func isFKPragma(stmt string) bool {
	s := strings.ToLower(strings.Join(strings.Fields(stmt), " "))
	return strings.HasPrefix(s, "pragma foreign_keys")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}
