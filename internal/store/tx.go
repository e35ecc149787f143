package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"agentpay/ent"
)

// TxFunc is the body of a transaction. tx is the ent transaction (all ent
// hooks apply); sqlTx is the same database transaction as a *sql.Tx, for
// River's InsertTx (river.Client[*sql.Tx]) and raw statements. ctx carries tx
// (ent.TxFromContext) and makes nested WithTx calls join it.
type TxFunc func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error

// WithTx runs fn in one database transaction shared by ent and raw SQL (the
// outbox, see the package doc). fn returning an error (or panicking) rolls
// back.
//
// Called with a ctx that already carries a WithTx transaction, fn joins that
// transaction and the outermost WithTx commits. This lets service functions
// that need a transaction call each other; on SQLite (one connection) a
// second, independent transaction would wait forever.
func (db *DB) WithTx(ctx context.Context, fn TxFunc) (err error) {
	if outer, ok := ctx.Value(activeTxKey{}).(*activeTx); ok {
		return fn(ctx, outer.tx, outer.sqlTx)
	}

	// The wrapped driver fills holder in when ent begins the transaction.
	holder := &sqlTxHolder{}
	tx, err := db.Ent.Tx(context.WithValue(ctx, sqlTxHolderKey{}, holder))
	if err != nil {
		return err
	}
	if holder.tx == nil {
		_ = tx.Rollback()
		return errors.New("agentpay: ent driver did not expose the *sql.Tx (is DB.Ent built by OpenDB?)")
	}

	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()

	txCtx := ent.NewTxContext(ctx, tx)
	active := &activeTx{tx: tx, sqlTx: holder.tx}
	txCtx = context.WithValue(txCtx, activeTxKey{}, active)
	if err := fn(txCtx, tx, holder.tx); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil {
			return errors.Join(err, fmt.Errorf("agentpay: rolling back: %w", rbErr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("agentpay: committing: %w", err)
	}
	for _, f := range active.afterCommit {
		f()
	}
	return nil
}

type activeTxKey struct{}

type activeTx struct {
	tx    *ent.Tx
	sqlTx *sql.Tx
	// afterCommit runs, in order, once the outermost WithTx has committed;
	// never after a rollback.
	afterCommit []func()
}

// AfterCommit registers f to run after the WithTx transaction that ctx
// carries (the one whose *sql.Tx is sqlTx, when sqlTx is not nil) commits,
// and reports true; without such a transaction it registers nothing and
// reports false.
func AfterCommit(ctx context.Context, sqlTx *sql.Tx, f func()) bool {
	active, ok := ctx.Value(activeTxKey{}).(*activeTx)
	if !ok || (sqlTx != nil && active.sqlTx != sqlTx) {
		return false
	}
	active.afterCommit = append(active.afterCommit, f)
	return true
}

// InTx reports whether ctx carries a WithTx transaction, which a WithTx
// called with ctx joins.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(activeTxKey{}).(*activeTx)
	return ok
}

type sqlTxHolderKey struct{}

type sqlTxHolder struct {
	tx *sql.Tx
}

// txSharingDriver is ent's SQL driver with one addition: when a transaction
// begins and the context carries a *sqlTxHolder, the underlying *sql.Tx is
// handed back through it. Everything else (queries, hooks, interceptors)
// behaves exactly as with the plain driver.
//
// Queries outside a transaction go through a prepared-statement cache.
type txSharingDriver struct {
	*entsql.Driver
	cached entsql.Conn
	stmts  *stmtCache
}

func newTxSharingDriver(dialect string, db *sql.DB, stmts *stmtCache) *txSharingDriver {
	return &txSharingDriver{Driver: entsql.OpenDB(dialect, db), cached: entsql.Conn{ExecQuerier: stmts}, stmts: stmts}
}

// Exec runs a statement outside a transaction, prepared once.
func (d *txSharingDriver) Exec(ctx context.Context, query string, args, v any) error {
	return d.cached.Exec(ctx, query, args, v)
}

// Query runs a query outside a transaction, prepared once.
func (d *txSharingDriver) Query(ctx context.Context, query string, args, v any) error {
	return d.cached.Query(ctx, query, args, v)
}

// Close releases the prepared statements, then the pool.
func (d *txSharingDriver) Close() error {
	d.stmts.close()
	return d.Driver.Close()
}

// Tx begins a transaction; see BeginTx.
func (d *txSharingDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	return d.BeginTx(ctx, nil)
}

// BeginTx begins a transaction and exposes its *sql.Tx to WithTx.
func (d *txSharingDriver) BeginTx(ctx context.Context, opts *sql.TxOptions) (dialect.Tx, error) {
	tx, err := d.Driver.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if holder, ok := ctx.Value(sqlTxHolderKey{}).(*sqlTxHolder); ok {
		if etx, ok := tx.(*entsql.Tx); ok {
			if sqlTx, ok := etx.ExecQuerier.(*sql.Tx); ok {
				holder.tx = sqlTx
			}
		}
	}
	return tx, nil
}

// ForUpdate locks the rows q selects until the transaction ends (SELECT ...
// FOR UPDATE) on PostgreSQL. On SQLite, which has no row locks and rejects
// the clause, it returns q unchanged: there every transaction already holds
// the database's write lock from BEGIN (BEGIN IMMEDIATE, one connection), so
// the rows cannot change under it either. Use it inside WithTx:
//
//	w, err := store.ForUpdate(db, tx.Wallet.Query().Where(wallet.ID(id))).Only(ctx)
func ForUpdate[Q interface {
	ForUpdate(...entsql.LockOption) Q
}](db *DB, q Q) Q {
	if !db.IsPostgres() {
		return q
	}
	return q.ForUpdate()
}
