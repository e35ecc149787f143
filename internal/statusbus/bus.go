package statusbus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"agentpay/internal/store"
)

// Topic names one kind of message (a feed). On PostgreSQL it is the NOTIFY
// channel, so it is a lower-case identifier: session_status.
type Topic string

// Resync is what a subscriber receives in place of messages it may have
// missed (the listener reconnected): it re-reads what it watches. Publish
// refuses it as a message.
const Resync = ""

// maxPayload is the longest '<key>:<message>' PostgreSQL sends: a NOTIFY
// payload must be shorter than 8000 bytes.
const maxPayload = 7999

// ErrNoListener is a subscription refused because the process's listener
// connection could not LISTEN in time.
var ErrNoListener = errors.New("listener did not connect")

// Bus publishes messages and delivers them to the subscribers of their
// topic and key.
type Bus interface {
	// Publish announces message under topic and key in sqlTx: subscribers
	// receive it once sqlTx commits, never if it rolls back. sqlTx may be
	// nil for a change already committed. A key must not contain ':'.
	Publish(ctx context.Context, sqlTx *sql.Tx, topic Topic, key, message string) error
	// Subscribe delivers the messages published under topic and key until
	// ctx ends, then closes the channel; Resync when some may have been
	// missed.
	Subscribe(ctx context.Context, topic Topic, key string) (<-chan string, error)
	// Watch calls f with the key and message of every message published
	// under topic, whatever its key, until ctx ends; f(Resync, Resync)
	// when some may have been missed, and on PostgreSQL as soon as the
	// listener connection is lost (again once it is back), so a cache fed
	// by f forgets what it may no longer hear about. f runs before the
	// message reaches Subscribe's channels, on the delivering goroutine: it
	// must not block.
	Watch(ctx context.Context, topic Topic, f func(key, message string)) error
}

// New returns the bus of db: LISTEN/NOTIFY on PostgreSQL, in process on
// SQLite.
func New(db *store.DB, logger *slog.Logger) Bus {
	if logger == nil {
		logger = slog.Default()
	}
	if db.IsPostgres() {
		return newPGBus(db.SQL, db.URL, logger)
	}
	return newLocalBus()
}

// checkMessage refuses what could not travel through NOTIFY's payload, or
// would read as something else at the other end.
func checkMessage(topic Topic, key, message string) error {
	switch {
	case topic == "":
		return errors.New("statusbus: empty topic")
	case strings.Contains(key, ":"):
		return fmt.Errorf("statusbus: key %q contains ':'", key)
	case message == Resync:
		return errors.New("statusbus: empty message")
	case len(key)+1+len(message) > maxPayload:
		return fmt.Errorf("statusbus: message of %d bytes is too long", len(message))
	}
	return nil
}

// localBus is the in-process bus (SQLite, one process).
type localBus struct {
	hub *hub
}

func newLocalBus() *localBus {
	return &localBus{hub: newHub()}
}

// Publish delivers after the WithTx transaction in ctx commits (when sqlTx
// is that transaction, or nil inside one); outside a transaction, at once.
func (b *localBus) Publish(ctx context.Context, sqlTx *sql.Tx, topic Topic, key, message string) error {
	if err := checkMessage(topic, key, message); err != nil {
		return err
	}
	deliver := func() { b.hub.deliver(topic, key, message) }
	if !store.AfterCommit(ctx, sqlTx, deliver) {
		deliver()
	}
	return nil
}

func (b *localBus) Subscribe(ctx context.Context, topic Topic, key string) (<-chan string, error) {
	return b.hub.subscribe(ctx, topic, key, nil), nil
}

func (b *localBus) Watch(ctx context.Context, topic Topic, f func(key, message string)) error {
	if topic == "" {
		return errors.New("statusbus: empty topic")
	}
	b.hub.watch(ctx, topic, f, nil)
	return nil
}
