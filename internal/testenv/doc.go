// Package testenv is the one test bundle: what a test needs to build an
// agentpay.Service on real parts, made in one place instead of in each
// package's tests.
//
// New gives a test its Env:
//
//   - a fresh migrated database (internal/testdb: SQLite, or PostgreSQL
//     copied from the migrated template when TEST_DATABASE_URL is set), or
//     a database the test already has (a second API instance on the same
//     database);
//   - a vault on a fresh master key (or a shared one) and the treasury keys
//     derived from it (internal/treasury), exactly as cmd/agentpay derives
//     them;
//   - the chain families (chains/adapters) and a discarding logger;
//   - on request (Options.Chains, or AddChain later) devnets (chains/devnet)
//     with the treasury funded with gas at genesis, wired to test mode's
//     chains.Networks through chains/adapters as cmd/agentpay wires a
//     configured chain: ledger, deposit watcher and watchlist, the
//     treasury's gas key. Devnets start only when asked for, concurrently:
//     a LiteSVM Solana devnet is a node process and costs seconds;
//   - with a database, an insert-only River client (Env.Jobs), the way the
//     API processes enqueue jobs (state changes that mail someone need it),
//     and on request a stub clock (Options.Clock);
//   - NewReceiver, a merchant's webhook endpoint on loopback; since it is
//     on loopback, Fill lets test-mode deliveries reach private addresses
//     (Config.WebhookAllowPrivate) unless Options.PublicWebhooksOnly;
//   - NewSMTPServer, a real SMTP server on loopback (emersion/go-smtp)
//     that keeps the messages it accepted, parsed (headers, text and HTML
//     parts), for the e-mail the service sends (SMTP_URL is its URL).
//
// Why testenv does not build the Service itself: the root package's tests
// are internal (package agentpay), and a package they import must not
// import agentpay (an import cycle). So the Env holds the pieces, and
// Env.Fill puts them into the zero fields of an agentpay.Config it finds by
// name, failing the test if a field is missing or of another type. Each
// package has one setup helper that builds its Service with it:
// newTestService in the root package, newTestAPI in rest, newTestServer in
// graph, newHarness in web and worker. cmd/agentpay's tests build theirs as
// the commands do (platform.service) and take only devnets, the master key
// and the receiver from the bundle.
//
// The devnets are the same for every test that asks: the treasury funded
// at genesis, short slots and poll intervals, each chain's full network
// (watcher included) whether or not the test scans. What tests do vary is
// an option: which chains, the EVM block time (0: blocks only on Commit, so
// the test decides when a deposit gains confirmations) and the
// confirmations per chain (which answers show).
package testenv
