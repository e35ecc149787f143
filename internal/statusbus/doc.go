// Package statusbus carries short messages from the transaction that
// causes them to the subscribers that wait for them, on every process
// using one database: the live feeds of the service (the first is a
// checkout session's status, statusfeed.go in the root package). It knows
// nothing of what a message means; its users name a Topic, a key within it
// (a session's external id) and the message.
//
// # Delivered on commit, never after a rollback
//
// Publish takes the caller's transaction. On PostgreSQL it runs
// pg_notify(topic, '<key>:<message>') in that transaction, so the server
// delivers the message when it commits, whichever process committed (API
// or worker). On SQLite (one process by design) the bus is in process and
// delivers after the store.WithTx transaction commits (store.AfterCommit).
//
// # One listener connection per process
//
// A PostgreSQL bus LISTENs on one lib/pq pq.Listener connection of its
// own, opened when the first subscriber arrives and closed when the last
// one leaves, with one LISTEN per topic that has had a subscriber; it fans
// the notifications out to the local subscribers of each (topic, key).
// A subscriber waits for its topic's LISTEN before Subscribe returns, so
// no message committed after that is missed.
//
// # Watchers
//
// Watch hears every key of a topic through a callback, called before the
// key's subscribers get the message (a cache it feeds never holds what a
// subscriber re-reads on that message). A watcher is told Resync when the
// PostgreSQL listener connection is lost, as soon as the bus learns it,
// and again on reconnection.
//
// # What a subscriber may miss
//
// Delivery never blocks a publisher: each subscriber has a buffer of
// subscriberBuffer messages, and one whose buffer is full misses the
// message. Notifications sent while the listener reconnects are lost; every
// subscriber then receives Resync, which tells it to re-read what it
// watches instead of waiting for what it missed.
package statusbus
