package statusbus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
)

// listenTimeout bounds how long a subscriber waits for its topic's LISTEN.
const listenTimeout = 10 * time.Second

// pgBus publishes with pg_notify and receives with a pq.Listener on its own
// connection, open while the process has subscribers.
type pgBus struct {
	db     *sql.DB
	dsn    string
	logger *slog.Logger
	hub    *hub

	// mu guards refs, cur and cur's topics.
	mu   sync.Mutex
	refs int
	cur  *pgListener
}

// pgListener is the listener connection and the topics it LISTENs on.
type pgListener struct {
	l      *pq.Listener
	topics map[Topic]*topicListen
}

// topicListen is one topic's LISTEN.
type topicListen struct {
	ready chan struct{}
	err   error // set before ready is closed
}

func newPGBus(db *sql.DB, dsn string, logger *slog.Logger) *pgBus {
	return &pgBus{db: db, dsn: dsn, logger: logger, hub: newHub()}
}

func (b *pgBus) Publish(ctx context.Context, sqlTx *sql.Tx, topic Topic, key, message string) error {
	if err := checkMessage(topic, key, message); err != nil {
		return err
	}
	const q = "SELECT pg_notify($1, $2)"
	payload := key + ":" + message
	var err error
	if sqlTx != nil {
		_, err = sqlTx.ExecContext(ctx, q, string(topic), payload)
	} else {
		_, err = b.db.ExecContext(ctx, q, string(topic), payload)
	}
	return err
}

func (b *pgBus) Subscribe(ctx context.Context, topic Topic, key string) (<-chan string, error) {
	if b.dsn == "" {
		return nil, errors.New("statusbus: the listener needs the database URL (DB.URL)")
	}
	if topic == "" {
		return nil, errors.New("statusbus: empty topic")
	}
	if err := b.acquire(ctx, topic); err != nil {
		return nil, err
	}
	return b.hub.subscribe(ctx, topic, key, b.release), nil
}

func (b *pgBus) Watch(ctx context.Context, topic Topic, f func(key, message string)) error {
	if b.dsn == "" {
		return errors.New("statusbus: the listener needs the database URL (DB.URL)")
	}
	if topic == "" {
		return errors.New("statusbus: empty topic")
	}
	if err := b.acquire(ctx, topic); err != nil {
		return err
	}
	b.hub.watch(ctx, topic, f, b.release)
	return nil
}

// acquire counts a subscriber and waits until its topic's LISTEN is in
// effect, starting the listener for the first subscriber and the LISTEN
// for the topic's first.
func (b *pgBus) acquire(ctx context.Context, topic Topic) error {
	b.mu.Lock()
	b.refs++
	if b.cur == nil {
		b.cur = b.startListener()
	}
	t := b.cur.topics[topic]
	if t == nil {
		t = b.listen(b.cur, topic)
	}
	b.mu.Unlock()

	timer := time.NewTimer(listenTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-t.ready:
		err = t.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("%w within %s", ErrNoListener, listenTimeout)
	}
	if err != nil {
		b.release()
		return err
	}
	return nil
}

// release uncounts a subscriber; the last one closes the listener.
func (b *pgBus) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refs--
	if b.refs == 0 && b.cur != nil {
		_ = b.cur.l.Close()
		b.cur = nil
	}
}

// listen starts cur's LISTEN on topic (b.mu held). A LISTEN that fails is
// forgotten, so the topic's next subscriber tries again.
func (b *pgBus) listen(cur *pgListener, topic Topic) *topicListen {
	t := &topicListen{ready: make(chan struct{})}
	cur.topics[topic] = t
	go func() {
		t.err = cur.l.Listen(string(topic))
		close(t.ready)
		if t.err != nil {
			b.mu.Lock()
			if cur.topics[topic] == t {
				delete(cur.topics, topic)
			}
			b.mu.Unlock()
		}
	}()
	return t
}

func (b *pgBus) startListener() *pgListener {
	cur := &pgListener{topics: map[Topic]*topicListen{}}
	cur.l = pq.NewListener(b.dsn, 100*time.Millisecond, 5*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventDisconnected:
			b.logger.Warn("statusbus listener disconnected", "err", err)
			// Watchers forget now what they may not hear about until the
			// connection is back (subscribers are told on reconnection).
			b.hub.resyncWatchers()
		case pq.ListenerEventConnectionAttemptFailed:
			b.logger.Warn("statusbus listener cannot connect", "err", err)
		}
	})
	go func() {
		for n := range cur.l.Notify {
			if n == nil {
				// Reconnected: notifications sent meanwhile are lost.
				b.hub.resyncAll()
				continue
			}
			key, message, ok := strings.Cut(n.Extra, ":")
			if !ok {
				continue
			}
			b.hub.deliver(Topic(n.Channel), key, message)
		}
	}()
	return cur
}
