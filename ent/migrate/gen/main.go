// Command gen writes the versioned SQL migrations for both database engines
// from the ent schema. It diffs the schema against what the existing
// migration files produce on a throwaway dev database (atlas "replay" mode),
// so each run writes only the new changes, plus the atlas.sum checksum file.
//
// Run from the module root after changing ent/schema and regenerating ent:
//
//	go run ./ent/migrate/gen -name add_something
//
// PostgreSQL needs a server where the user may CREATE DATABASE; a database
// named agentpay_migrategen_<random> is created there and dropped afterwards.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"text/template"
	"time"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"agentpay/ent/migrate"
)

func main() {
	var (
		name    = flag.String("name", "", "name of the migration (required), e.g. add_refunds")
		dir     = flag.String("dir", "migrations", "root directory holding sqlite/ and postgres/")
		engines = flag.String("dialect", "all", "sqlite, postgres or all")
		pgURL   = flag.String("postgres-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
			"PostgreSQL server on which a throwaway dev database is created")
	)
	flag.Parse()
	if *name == "" {
		log.Fatal("-name is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// One version for both engines, so their histories line up file by file
	// (the runtime test checks they do).
	formatter := versionedFormatter(time.Now().UTC().Format("20060102150405"))

	if *engines == "all" || *engines == "sqlite" {
		if err := diffSQLite(ctx, filepath.Join(*dir, "sqlite"), *name, formatter); err != nil {
			log.Fatalf("sqlite: %v", err)
		}
	}
	if *engines == "all" || *engines == "postgres" {
		if err := diffPostgres(ctx, filepath.Join(*dir, "postgres"), *name, *pgURL, formatter); err != nil {
			log.Fatalf("postgres: %v", err)
		}
	}
}

func diffSQLite(ctx context.Context, dir, name string, formatter atlasmigrate.Formatter) error {
	// One connection: every new connection to :memory: is a new database.
	db, err := sql.Open("sqlite", "file:migrategen?mode=memory&_pragma=foreign_keys(1)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return diff(ctx, entsql.OpenDB(dialect.SQLite, db), dialect.SQLite, dir, name, formatter)
}

func diffPostgres(ctx context.Context, dir, name, serverURL string, formatter atlasmigrate.Formatter) error {
	admin, err := sql.Open("postgres", serverURL)
	if err != nil {
		return err
	}
	defer admin.Close()

	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	devName := "agentpay_migrategen_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+devName); err != nil {
		return fmt.Errorf("creating dev database: %w", err)
	}
	defer func() {
		// A fresh context: the dev database must go even if ctx expired.
		dropCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(dropCtx, "DROP DATABASE IF EXISTS "+devName+" WITH (FORCE)"); err != nil {
			log.Printf("dropping dev database %s: %v", devName, err)
		}
	}()

	u, err := url.Parse(serverURL)
	if err != nil {
		return err
	}
	u.Path = "/" + devName
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		return err
	}
	defer db.Close()
	return diff(ctx, entsql.OpenDB(dialect.Postgres, db), dialect.Postgres, dir, name, formatter)
}

func diff(ctx context.Context, drv dialect.Driver, dialectName, dirPath, name string, formatter atlasmigrate.Formatter) error {
	if err := os.MkdirAll(dirPath, 0o755); err != nil {
		return err
	}
	dir, err := atlasmigrate.NewLocalDir(dirPath)
	if err != nil {
		return err
	}
	m, err := schema.NewMigrate(drv,
		schema.WithDir(dir),
		schema.WithDialect(dialectName),
		schema.WithMigrationMode(schema.ModeReplay),
		schema.WithFormatter(formatter),
		schema.WithDropColumn(true),
		schema.WithDropIndex(true),
		schema.WithErrNoPlan(true),
	)
	if err != nil {
		return err
	}
	err = m.NamedDiff(ctx, name, migrate.Tables...)
	switch {
	case errors.Is(err, atlasmigrate.ErrNoPlan):
		log.Printf("%s: schema unchanged, no migration written", dialectName)
		return nil
	case err != nil:
		return err
	}
	log.Printf("%s: wrote migration %q to %s", dialectName, name, dirPath)
	return nil
}

// versionedFormatter is atlas's default format with a fixed version instead
// of "now" at the moment each file is written.
func versionedFormatter(version string) atlasmigrate.Formatter {
	name := template.Must(template.New("name").Parse(version + "{{ with .Name }}_{{ . }}{{ end }}.sql"))
	return atlasmigrate.TemplateFormatter{{N: name, C: atlasmigrate.DefaultFormatter[0].C}}
}
