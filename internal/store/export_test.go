package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// SchemaMigrationsTable is schemaMigrationsTable, for the external tests.
const SchemaMigrationsTable = schemaMigrationsTable

// OnOwnConn runs f on the connection b's statement has to itself on db
// (BatchSpec.GenericPlan), holding it; an error when it has none open.
func (b *Batched[K, In, Out]) OnOwnConn(db *DB, f func(*sql.Conn) error) error {
	c := b.runners.For(db).conn
	if c == nil {
		return errors.New("the statement runs on the pool")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return errors.New("no connection open")
	}
	return f(c.conn)
}

// MigrateBefore applies the migrations older than the one named name (its
// file name after the version), leaving the database as the release
// before it did, so a test sees what that migration does to existing rows.
func (db *DB) MigrateBefore(ctx context.Context, name string) error {
	ms, err := Migrations(db.Dialect)
	if err != nil {
		return err
	}
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := createMigrationsTable(ctx, conn); err != nil {
		return err
	}
	for _, m := range ms {
		if strings.HasSuffix(m.Name, "_"+name+".sql") {
			return nil
		}
		if _, err := db.applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return fmt.Errorf("no migration named %s", name)
}

// Rebind is rebind, for the external tests' raw statements.
func (db *DB) Rebind(query string) string { return db.rebind(query) }

// ConnStatements is how many statements the SQLite connection conn keeps
// compiled (-1: conn is not a caching connection).
func ConnStatements(conn *sql.Conn) (n int) {
	n = -1
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*cachingConn); ok {
			c.mu.Lock()
			n = len(c.stmts)
			c.mu.Unlock()
		}
		return nil
	})
	return n
}

// MaxConnStatements is maxConnStatements, for the external tests.
const MaxConnStatements = maxConnStatements
