package store

import (
	"database/sql"
	"errors"
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
