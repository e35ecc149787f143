// Package freshdb creates an empty, uniquely named database per test and
// returns its URL. It imports nothing of agentpay, so tests inside the root
// package can use it too (internal/testdb, which migrates, cannot be imported
// there without an import cycle).
//
// The engine follows TEST_DATABASE_URL: unset means SQLite (a file in
// t.TempDir()); a postgres:// URL means a new database on that server,
// created with CREATE DATABASE and dropped when the test ends. The same test
// suite thus runs on both engines:
//
//	go test ./...
//	TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go test ./...
package freshdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/lib/pq" // database/sql driver "postgres"
)

// EnvVar names the environment variable selecting the test database server.
const EnvVar = "TEST_DATABASE_URL"

// ServerURL returns TEST_DATABASE_URL, empty when the tests run on SQLite.
func ServerURL() string {
	return os.Getenv(EnvVar)
}

// IsPostgres reports whether tests run on PostgreSQL.
func IsPostgres() bool {
	u := ServerURL()
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// URL returns the URL of a new empty database that lives as long as the test.
func URL(tb testing.TB) string {
	tb.Helper()
	if !IsPostgres() {
		return filepath.Join(tb.TempDir(), "agentpay.db")
	}
	return postgresURL(tb)
}

var (
	adminOnce sync.Once
	admin     *sql.DB
	adminErr  error
)

// adminDB is one pool per test binary to the server of TEST_DATABASE_URL,
// used only for CREATE/DROP DATABASE.
func adminDB() (*sql.DB, error) {
	adminOnce.Do(func() {
		admin, adminErr = sql.Open("postgres", ServerURL())
		if adminErr == nil {
			admin.SetMaxOpenConns(4)
		}
	})
	return admin, adminErr
}

func postgresURL(tb testing.TB) string {
	tb.Helper()
	return URLFromTemplate(tb, "template0")
}

// URLFromTemplate is URL on PostgreSQL, but the new database is a copy of the
// database named template (which must have no open connections). Copying a
// migrated template is several times faster than migrating each database.
func URLFromTemplate(tb testing.TB, template string) string {
	tb.Helper()
	if !IsPostgres() {
		tb.Fatalf("freshdb: URLFromTemplate needs %s set to a PostgreSQL URL", EnvVar)
	}
	db, err := adminDB()
	if err != nil {
		tb.Fatalf("freshdb: opening %s: %v", EnvVar, err)
	}

	name := databaseName(tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE "+quoteIdent(template)); err != nil {
		tb.Fatalf("freshdb: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE: a pool the test forgot to close must not keep it alive.
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("freshdb: dropping database %s: %v", name, err)
		}
	})
	return DatabaseURL(tb, name)
}

// DatabaseURL is TEST_DATABASE_URL pointed at another database on the same
// server.
func DatabaseURL(tb testing.TB, name string) string {
	tb.Helper()
	u, err := url.Parse(ServerURL())
	if err != nil {
		tb.Fatalf("freshdb: parsing %s: %v", EnvVar, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Admin returns the pool to the TEST_DATABASE_URL server (shared by the whole
// test binary; do not close it).
func Admin() (*sql.DB, error) {
	return adminDB()
}

func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// databaseName is unique and still says which test made it (handy when one
// is left behind by a killed test binary).
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 32 {
			break
		}
	}
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		panic(err)
	}
	return "agentpay_test_" + b.String() + "_" + hex.EncodeToString(suffix)
}
