// Package agentpay is the service layer: every rule of the agent and
// merchant APIs lives here. The REST facade (rest), GraphQL (graph), the
// checkout pages (web) and the worker call it; they translate requests and
// answers, they do not decide.
//
// # One file per business concept
//
// The package holds the rules, one business concept per file: a
// checkout session's life (sessions.go), what its status allows
// (sessionstate.go), the hosted page (checkoutpage.go), what a deposit does
// to it (payments.go), and so on. The machinery the rules use lives behind
// internal/: the database and its transactions (internal/store), keys,
// secrets and ids (internal/vault), the live feeds (internal/statusbus);
// the chains are reached through package chains' interfaces only.
//
// # A change and what it causes commit together
//
// A state change is written in one transaction (store.WithTx) with
// everything it causes: the events it records (RecordEvent) with their
// webhook deliveries, the River jobs it enqueues (JobInserter), the live
// status it publishes (PublishSessionStatus). Commit makes all of them
// visible at once; a rollback leaves none, so a crash never loses or
// invents an event or a job. The jobs are idempotent: one run twice changes
// nothing more.
package agentpay
