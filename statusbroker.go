package agentpay

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

	"agentpay/ent/checkoutsession"
	"agentpay/internal/store"
)

// Live session status (design.md section 1): every committed change of a
// checkout session's status is published; subscribers (the GraphQL
// sessionStatus subscription) on every API process receive it.
//
//   - PostgreSQL: Publish runs pg_notify('session_status', '<external_id>:<status>')
//     in the caller's transaction, so it is delivered on commit only (never
//     after a rollback), by whichever process committed (API or worker). Each
//     process LISTENs on one lib/pq pq.Listener connection, opened while it
//     has at least one subscriber, and fans notifications out locally.
//   - SQLite (dev, one process): an in-process broker; a Publish inside a
//     WithTx transaction is delivered after that transaction commits.

// StatusChannel is the PostgreSQL NOTIFY channel of session status changes.
const StatusChannel = "session_status"

// StatusBroker publishes session status changes and delivers them to
// subscribers.
type StatusBroker interface {
	// Publish announces that the session's status became status in sqlTx:
	// subscribers receive it once sqlTx commits, never if it rolls back.
	// sqlTx may be nil for a change already committed.
	Publish(ctx context.Context, sqlTx *sql.Tx, externalID, status string) error
	// Subscribe delivers the statuses published for the session until ctx
	// ends, then closes the channel. An empty string means changes may have
	// been missed (the listener reconnected, or the subscriber fell behind):
	// re-read the session.
	Subscribe(ctx context.Context, externalID string) (<-chan string, error)
}

// NewStatusBroker returns the broker for db: a PostgreSQL LISTEN/NOTIFY
// broker on PostgreSQL, an in-process one on SQLite.
func NewStatusBroker(db *store.DB, logger *slog.Logger) StatusBroker {
	if logger == nil {
		logger = slog.Default()
	}
	if db.IsPostgres() {
		return newPGStatusBroker(db.SQL, db.URL, logger)
	}
	return newLocalStatusBroker()
}

// PublishSessionStatus announces a session's new status from inside the
// transaction that changes it (sqlTx: WithTx's): subscribers on every
// process receive it after the commit, never after a rollback. Call it in
// every transaction that sets a session's status.
func (s *Service) PublishSessionStatus(ctx context.Context, sqlTx *sql.Tx, externalID, status string) error {
	if err := s.broker.Publish(ctx, sqlTx, externalID, status); err != nil {
		return fmt.Errorf("publishing session status: %w", err)
	}
	return nil
}

// SessionStatusUpdate is one message of WatchSessionStatus.
type SessionStatusUpdate struct {
	ExternalID string
	CheckoutStatus
}

// WatchSessionStatus sends the session's payment status now, then again
// each time a change of its status is published, until ctx ends. The status
// sent is the published one; the other fields are read fresh. A message
// equal to the previous one is not repeated. An unknown session is
// ErrNotFound.
func (s *Service) WatchSessionStatus(ctx context.Context, externalID string) (<-chan SessionStatusUpdate, error) {
	ctx, cancel := context.WithCancel(ctx)
	// Subscribe before reading, so no change committed after the read is
	// missed.
	events, err := s.broker.Subscribe(ctx, externalID)
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := s.CheckoutStatus(ctx, externalID, "")
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan SessionStatusUpdate, 1)
	last := SessionStatusUpdate{ExternalID: externalID, CheckoutStatus: *first}
	out <- last
	go func() {
		defer cancel()
		defer close(out)
		for ev := range events {
			st, err := s.CheckoutStatus(ctx, externalID, "")
			if err != nil {
				if ctx.Err() == nil {
					s.logger.WarnContext(ctx, "session status watch: reading status", "session", externalID, "err", err)
				}
				continue
			}
			if ev != "" {
				st.Status = checkoutsession.Status(ev)
			}
			next := SessionStatusUpdate{ExternalID: externalID, CheckoutStatus: *st}
			if sameStatus(next, last) {
				continue
			}
			select {
			case out <- next:
				last = next
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func sameStatus(a, b SessionStatusUpdate) bool {
	ra, rb := a.Required, b.Required
	return a.Status == b.Status && a.AmountPaid.Equal(b.AmountPaid) && a.Chain == b.Chain &&
		a.Token == b.Token && a.Confirmations == b.Confirmations &&
		(ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}

// statusHub fans statuses out to the local subscribers of each session.
// Delivery never blocks the publisher: each subscriber has a buffer of
// statusSubscriberBuffer messages and a subscriber whose buffer is full
// misses the message (a session has a handful of statuses, far below it).
type statusHub struct {
	mu   sync.Mutex
	subs map[string]map[chan string]struct{}
	n    int
}

const statusSubscriberBuffer = 32

func newStatusHub() *statusHub {
	return &statusHub{subs: map[string]map[chan string]struct{}{}}
}

func (h *statusHub) add(externalID string) chan string {
	ch := make(chan string, statusSubscriberBuffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[externalID]
	if m == nil {
		m = map[chan string]struct{}{}
		h.subs[externalID] = m
	}
	m[ch] = struct{}{}
	h.n++
	return ch
}

// remove unregisters and closes ch.
func (h *statusHub) remove(externalID string, ch chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[externalID]
	if _, ok := m[ch]; !ok {
		return
	}
	delete(m, ch)
	if len(m) == 0 {
		delete(h.subs, externalID)
	}
	h.n--
	close(ch)
}

func (h *statusHub) deliver(externalID, status string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[externalID] {
		select {
		case ch <- status:
		default:
		}
	}
}

// resyncAll tells every subscriber that changes may have been missed.
func (h *statusHub) resyncAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for ch := range m {
			select {
			case ch <- "":
			default:
			}
		}
	}
}

func (h *statusHub) subscribe(ctx context.Context, externalID string, done func()) <-chan string {
	ch := h.add(externalID)
	go func() {
		<-ctx.Done()
		h.remove(externalID, ch)
		if done != nil {
			done()
		}
	}()
	return ch
}

// localStatusBroker is the in-process broker (SQLite, one process).
type localStatusBroker struct {
	hub *statusHub
}

func newLocalStatusBroker() *localStatusBroker {
	return &localStatusBroker{hub: newStatusHub()}
}

// Publish delivers after the WithTx transaction in ctx commits (when sqlTx
// is that transaction, or nil inside one); outside a transaction, at once.
func (b *localStatusBroker) Publish(ctx context.Context, sqlTx *sql.Tx, externalID, status string) error {
	deliver := func() { b.hub.deliver(externalID, status) }
	if !store.AfterCommit(ctx, sqlTx, deliver) {
		deliver()
	}
	return nil
}

func (b *localStatusBroker) Subscribe(ctx context.Context, externalID string) (<-chan string, error) {
	return b.hub.subscribe(ctx, externalID, nil), nil
}

// pgStatusBroker publishes with pg_notify and receives with a pq.Listener
// on its own connection, open while the process has subscribers.
type pgStatusBroker struct {
	db     *sql.DB
	dsn    string
	logger *slog.Logger
	hub    *statusHub

	mu   sync.Mutex
	refs int
	cur  *pgListen
}

type pgListen struct {
	l     *pq.Listener
	ready chan struct{}
	err   error // set before ready is closed
}

// pgListenTimeout bounds how long a subscriber waits for the LISTEN.
const pgListenTimeout = 10 * time.Second

func newPGStatusBroker(db *sql.DB, dsn string, logger *slog.Logger) *pgStatusBroker {
	return &pgStatusBroker{db: db, dsn: dsn, logger: logger, hub: newStatusHub()}
}

func (b *pgStatusBroker) Publish(ctx context.Context, sqlTx *sql.Tx, externalID, status string) error {
	const q = "SELECT pg_notify('" + StatusChannel + "', $1)"
	payload := externalID + ":" + status
	var err error
	if sqlTx != nil {
		_, err = sqlTx.ExecContext(ctx, q, payload)
	} else {
		_, err = b.db.ExecContext(ctx, q, payload)
	}
	return err
}

func (b *pgStatusBroker) Subscribe(ctx context.Context, externalID string) (<-chan string, error) {
	if b.dsn == "" {
		return nil, errors.New("agentpay: status listener needs the database URL (DB.URL)")
	}
	if err := b.acquire(ctx); err != nil {
		return nil, err
	}
	return b.hub.subscribe(ctx, externalID, b.release), nil
}

// acquire counts a subscriber and waits until the listener's LISTEN is in
// effect, starting the listener for the first subscriber.
func (b *pgStatusBroker) acquire(ctx context.Context) error {
	b.mu.Lock()
	b.refs++
	if b.cur == nil {
		b.cur = b.startListener()
	}
	cur := b.cur
	b.mu.Unlock()

	timer := time.NewTimer(pgListenTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-cur.ready:
		err = cur.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("%w: status listener did not connect within %s", ErrUnavailable, pgListenTimeout)
	}
	if err != nil {
		b.release()
		return err
	}
	return nil
}

// release uncounts a subscriber; the last one closes the listener.
func (b *pgStatusBroker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refs--
	if b.refs == 0 && b.cur != nil {
		_ = b.cur.l.Close()
		b.cur = nil
	}
}

func (b *pgStatusBroker) startListener() *pgListen {
	cur := &pgListen{ready: make(chan struct{})}
	cur.l = pq.NewListener(b.dsn, 100*time.Millisecond, 5*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventDisconnected:
			b.logger.Warn("session status listener disconnected", "err", err)
		case pq.ListenerEventConnectionAttemptFailed:
			b.logger.Warn("session status listener cannot connect", "err", err)
		}
	})
	go func() {
		cur.err = cur.l.Listen(StatusChannel)
		close(cur.ready)
	}()
	go func() {
		for n := range cur.l.Notify {
			if n == nil {
				// Reconnected: notifications sent meanwhile are lost.
				b.hub.resyncAll()
				continue
			}
			i := strings.LastIndexByte(n.Extra, ':')
			if i < 0 {
				continue
			}
			b.hub.deliver(n.Extra[:i], n.Extra[i+1:])
		}
	}()
	return cur
}
