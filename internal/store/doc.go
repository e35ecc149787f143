// Package store is the service's database: opening it (PostgreSQL or
// SQLite), transactions, migrations, and the few things that must be shared
// by everything using one pool. It knows the ent schema but no business
// rule; the root package agentpay holds those.
//
// # Two engines, one code path
//
// DB pairs the ent client (the data model) with its *sql.DB (River and the
// few statements ent cannot express); DB.Dialect says which engine it is,
// and the rare statement that differs asks IsPostgres. PostgreSQL gets a
// pool (lib/pq). SQLite (modernc.org/sqlite, pure Go) runs on ONE
// connection: River's SQLite driver requires it, and it serialises writers
// without SQLITE_BUSY errors. The price: while a transaction is open,
// anything that uses the pool instead of the transaction (db.Ent outside
// WithTx's tx, db.SQL) waits for that transaction to end, so inside WithTx
// use only the tx arguments.
//
// # Transactions: the outbox
//
// A state change and the jobs and events it causes commit together or not
// at all: WithTx runs ent and raw SQL (River's InsertTx) in one database
// transaction, joined by any WithTx inside it; AfterCommit defers work (a
// notification) until the outermost one has committed.
//
// # Per pool, not per package
//
// What must be shared by every user of a pool lives in its DB, never in a
// package-level map keyed by *sql.DB: the statement cache (QueryCached, and
// ent's queries outside transactions), the values made through PerDB (the
// runners of the Batched statements), released by DB.Close, and the change
// listeners (OnChange) fed by the one ent hook OpenDB installs. Two
// Services on one DB therefore share batches and hear the same committed
// changes, and nothing outlives the DB.
//
// # Compiled statements
//
// Two caches keep SQL from being compiled again: the pool's (stmtCache,
// above) for the many small reads outside transactions, on either engine;
// and, on SQLite only, each connection's (sqlitestmts.go), which keeps every
// query text it runs compiled, inside transactions and for River too, since
// on SQLite compiling a small statement costs more than running it. A text
// whose earlier rows are still being read runs compiled afresh, as without
// the cache. PostgreSQL's connections are not wrapped: a statement prepared
// there is a round trip of its own.
//
// # Batched statements (group commit)
//
// A statement that many requests run at once (the checkout page's status
// polls, the webhook tries' writes) can be a Batched: the calls that arrive
// while one batch runs are run together by the next (GroupBatch), in one
// statement whose array arguments hold every call's input and whose rows
// answer each call by key. Under load the database then serves a fraction
// of the statements, and a write's batch waits for one WAL flush instead of
// one each. The rule that owns the table says what the statement is and
// how a call maps to it (BatchSpec); the batching, the per-pool runner and
// the statement's own connection (BatchSpec.GenericPlan) are here.
//
// # Migrations
//
// The versioned SQL files live in the top-level migrations package, where
// `go run ./ent/migrate/gen -name <change>` writes them; Migrate applies
// them, then River's own, and every process may call it at start.
package store
