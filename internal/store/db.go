package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"entgo.io/ent/dialect"
	_ "github.com/lib/pq" // database/sql driver "postgres"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"modernc.org/sqlite" // database/sql driver "sqlite" (pure Go)

	"agentpay/ent"
	"agentpay/internal/redact"
)

// Dialect names of the two supported engines (ent's names).
const (
	DialectPostgres = dialect.Postgres // "postgres"
	DialectSQLite   = dialect.SQLite   // "sqlite3"
)

// sqlitePragmas are applied to every SQLite connection. foreign_keys: ent
// relies on them and SQLite leaves them off by default. WAL + NORMAL: readers
// never block the writer and commits are cheap yet durable against crashes of
// the process. busy_timeout: another process (agentpay migrate beside a
// running dev server) waits for the lock instead of failing with SQLITE_BUSY.
var sqlitePragmas = []string{
	"foreign_keys(1)",
	"journal_mode(WAL)",
	"busy_timeout(5000)",
	"synchronous(NORMAL)",
}

// DBConfig configures OpenDB.
type DBConfig struct {
	// URL is either a PostgreSQL URL (postgres://... or postgresql://...,
	// opened with lib/pq) or a SQLite database: a file path, a file: URL or
	// sqlite:// followed by a path.
	URL string

	// MaxOpenConns caps the PostgreSQL pool (default 20, at least 2). SQLite
	// always uses one connection (see the package doc).
	MaxOpenConns int
}

// DB is the database handle of the service (see the package doc). Build it
// with OpenDB.
type DB struct {
	// Ent is the ent client. Its driver is wrapped so that WithTx can hand the
	// transaction's *sql.Tx to River.
	Ent *ent.Client
	// SQL is the underlying pool, shared with Ent.
	SQL *sql.DB
	// Dialect is DialectPostgres or DialectSQLite.
	Dialect string
	// URL is the DBConfig.URL the database was opened with (the PostgreSQL
	// status listener opens its own connection with it).
	URL string

	// stmts is the pool's statement cache, shared by ent's queries outside
	// transactions and QueryCached.
	stmts *stmtCache

	// values holds the DB's PerDB values; closers release them on Close.
	values   sync.Map // *PerDB[T] -> T
	valuesMu sync.Mutex
	closers  []func()

	// listeners hear of the changes committed through Ent (OnChange).
	listeners   atomic.Pointer[[]*changeListener]
	listenersMu sync.Mutex
}

// OpenDB opens and pings the database named by cfg.URL. It does not migrate;
// call Migrate for that. SQLite runs on a single connection: see the package
// doc for what that asks of callers.
func OpenDB(ctx context.Context, cfg DBConfig) (*DB, error) {
	if cfg.URL == "" {
		return nil, errors.New("agentpay: DBConfig.URL is required")
	}

	var (
		sqlDB   *sql.DB
		dialect string
		err     error
	)
	switch {
	case isPostgresURL(cfg.URL):
		dialect = DialectPostgres
		sqlDB, err = sql.Open("postgres", cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("agentpay: opening postgres: %w", redact.Error(err, cfg.URL))
		}
		maxOpen := cfg.MaxOpenConns
		if maxOpen <= 0 {
			maxOpen = 20
		}
		// Migrate holds its advisory lock on one connection while River's
		// migrator uses another: a pool of one would wait forever.
		maxOpen = max(maxOpen, 2)
		sqlDB.SetMaxOpenConns(maxOpen)
		sqlDB.SetMaxIdleConns(maxOpen)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	default:
		dialect = DialectSQLite
		dsn, err := sqliteDSN(cfg.URL)
		if err != nil {
			return nil, err
		}
		connector, err := sqlite.NewConnector(dsn)
		if err != nil {
			return nil, fmt.Errorf("agentpay: opening sqlite: %w", err)
		}
		sqlDB = sql.OpenDB(sqliteConnector{connector})
		sqlDB.SetMaxOpenConns(1)
		// Keep the one connection forever: for file::memory: databases closing
		// it would drop the data, and reopening costs the pragmas again.
		sqlDB.SetMaxIdleConns(1)
		sqlDB.SetConnMaxLifetime(0)
		sqlDB.SetConnMaxIdleTime(0)
	}

	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		// The driver quotes a URL it cannot parse, password included.
		return nil, fmt.Errorf("agentpay: connecting to the %s database: %w", dialectLabel(dialect), redact.Error(err, cfg.URL))
	}

	stmts := newStmtCache(sqlDB)
	db := &DB{
		Ent:     ent.NewClient(ent.Driver(newTxSharingDriver(dialect, sqlDB, stmts))),
		SQL:     sqlDB,
		Dialect: dialect,
		URL:     cfg.URL,
		stmts:   stmts,
	}
	// One hook for every listener: its transactions come from this client,
	// so it sees the writes made inside WithTx too.
	db.Ent.Use(db.changeHook)
	return db, nil
}

// Close releases the DB's per-DB values (PerDB), then closes the pool (and
// with it the ent client).
func (db *DB) Close() error {
	db.closeValues()
	return db.Ent.Close()
}

// Ping checks that the database answers; used by /readyz.
func (db *DB) Ping(ctx context.Context) error {
	return db.SQL.PingContext(ctx)
}

// RiverDriver returns River's database/sql driver for this database, sharing
// the pool: riverdatabasesql on PostgreSQL (lib/pq; jobs are picked up by
// polling unless the worker adds a pgx LISTEN pool with
// riverdatabasesql.NewWithPgxListener), riversqlite on SQLite. Either way the
// client is a river.Client[*sql.Tx], so InsertTx takes WithTx's sqlTx.
func (db *DB) RiverDriver() riverdriver.Driver[*sql.Tx] {
	if db.IsPostgres() {
		return riverdatabasesql.New(db.SQL)
	}
	return riversqlite.New(db.SQL)
}

// IsPostgres reports whether the database is PostgreSQL.
func (db *DB) IsPostgres() bool { return db.Dialect == DialectPostgres }

func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

func dialectLabel(d string) string {
	if d == DialectSQLite {
		return "sqlite"
	}
	return d
}

// sqliteDSN turns a path or URL into a modernc.org/sqlite DSN with our
// pragmas. Pragmas the caller already gave win (e.g. a test that wants
// journal_mode(MEMORY)).
func sqliteDSN(raw string) (string, error) {
	s := strings.TrimPrefix(raw, "sqlite://")
	s = strings.TrimPrefix(s, "sqlite:")
	if !strings.HasPrefix(s, "file:") {
		s = "file:" + s
	}
	path, rawQuery, _ := strings.Cut(s, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", fmt.Errorf("agentpay: bad sqlite URL %q: %w", raw, err)
	}
	given := map[string]bool{}
	for _, p := range query["_pragma"] {
		name, _, _ := strings.Cut(p, "(")
		given[strings.ToLower(strings.TrimSpace(name))] = true
	}
	for _, p := range sqlitePragmas {
		name, _, _ := strings.Cut(p, "(")
		if !given[name] {
			query.Add("_pragma", p)
		}
	}
	// BEGIN IMMEDIATE: a transaction takes the write lock up front, so two
	// processes never both read and then deadlock on upgrading to write.
	if query.Get("_txlock") == "" {
		query.Set("_txlock", "immediate")
	}
	return path + "?" + query.Encode(), nil
}
