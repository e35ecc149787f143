package statusbus

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/testdb"
)

// recvMessage waits for the next message on ch.
func recvMessage(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		require.True(t, ok, "channel closed")
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return ""
	}
}

func requireNoMessage(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("unexpected message %q", s)
	case <-time.After(200 * time.Millisecond):
	}
}

// topic and otherTopic are the tests' topics.
const (
	topic      Topic = "statusbus_test"
	otherTopic Topic = "statusbus_test_other"
)

// TestBusDeliversOnCommitOnly holds for both buses: the one New picks for
// the test database (in-process on SQLite, LISTEN/NOTIFY on PostgreSQL).
func TestBusDeliversOnCommitOnly(t *testing.T) {
	db := testdb.Open(t)
	b := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := b.Subscribe(ctx, topic, "cs_a")
	require.NoError(t, err)
	other, err := b.Subscribe(ctx, topic, "cs_b")
	require.NoError(t, err)
	sameKey, err := b.Subscribe(ctx, otherTopic, "cs_a")
	require.NoError(t, err)

	// Held back until the commit; a nested WithTx joins the outer one.
	committed := make(chan struct{})
	err = db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, b.Publish(ctx, sqlTx, topic, "cs_a", "detecting"))
		require.NoError(t, db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
			return b.Publish(ctx, sqlTx, topic, "cs_a", "confirming")
		}))
		select {
		case s := <-ch:
			t.Errorf("delivered %q before the commit", s)
		case <-time.After(100 * time.Millisecond):
		}
		close(committed)
		return nil
	})
	require.NoError(t, err)
	<-committed
	require.Equal(t, "detecting", recvMessage(t, ch))
	require.Equal(t, "confirming", recvMessage(t, ch))

	// Never after a rollback.
	err = db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, b.Publish(ctx, sqlTx, topic, "cs_a", "cancelled"))
		return errors.New("roll back")
	})
	require.Error(t, err)
	requireNoMessage(t, ch)

	// Outside a transaction: at once. Other keys' subscribers, and the
	// same key's on another topic, see nothing of it.
	require.NoError(t, b.Publish(ctx, nil, topic, "cs_a", "expired"))
	require.Equal(t, "expired", recvMessage(t, ch))
	requireNoMessage(t, other)
	requireNoMessage(t, sameKey)
	require.NoError(t, b.Publish(ctx, nil, otherTopic, "cs_a", "a:message with colons"))
	require.Equal(t, "a:message with colons", recvMessage(t, sameKey))
	requireNoMessage(t, ch)

	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the channel stays open after ctx ends")
	}
}

// TestBusWatchHearsEveryKey holds for both buses: a watcher hears every
// key of its topic on commit (before the key's subscribers), nothing of
// other topics or rollbacks, and nothing once its ctx ends; on PostgreSQL
// it hears Resync when the listener connection is lost.
func TestBusWatchHearsEveryKey(t *testing.T) {
	db := testdb.Open(t)
	b := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard := make(chan string, 16)
	require.NoError(t, b.Watch(ctx, topic, func(key, message string) { heard <- key + "=" + message }))
	sub, err := b.Subscribe(ctx, topic, "cs_b")
	require.NoError(t, err)

	err = db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, b.Publish(ctx, sqlTx, topic, "cs_a", "detecting"))
		require.NoError(t, b.Publish(ctx, sqlTx, otherTopic, "cs_a", "other"))
		requireNoMessage(t, heard)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, "cs_a=detecting", recvMessage(t, heard))
	require.Error(t, db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, b.Publish(ctx, sqlTx, topic, "cs_a", "cancelled"))
		return errors.New("roll back")
	}))
	require.NoError(t, b.Publish(ctx, nil, topic, "cs_b", "expired"))
	// The watcher has heard it by the time the subscriber does.
	require.Equal(t, "expired", recvMessage(t, sub))
	select {
	case got := <-heard:
		require.Equal(t, "cs_b=expired", got)
	default:
		t.Fatal("the subscriber heard before the watcher")
	}
	requireNoMessage(t, heard)

	if _, ok := b.(*pgBus); ok {
		// The listener's connection is killed: Resync at once.
		_, err := db.SQL.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'listen%'`)
		require.NoError(t, err)
		require.Equal(t, "=", recvMessage(t, heard))
		// Back: Resync again on reconnection, then messages as before.
		require.Eventually(t, func() bool {
			require.NoError(t, b.Publish(ctx, nil, topic, "cs_a", "back"))
			for {
				select {
				case got := <-heard:
					if got == "cs_a=back" {
						return true
					}
				case <-time.After(200 * time.Millisecond):
					return false
				}
			}
		}, 10*time.Second, 10*time.Millisecond)
	}

	cancel()
	time.Sleep(100 * time.Millisecond)
	for len(heard) > 0 {
		<-heard
	}
	require.NoError(t, b.Publish(context.Background(), nil, topic, "cs_a", "confirmed"))
	requireNoMessage(t, heard)
}

// TestPGBusListenerLifecycle: the listener connection exists only while
// there are subscribers, LISTENs once per topic, and a new one works after
// the last subscriber left.
func TestPGBusListenerLifecycle(t *testing.T) {
	db := testdb.Open(t)
	if !db.IsPostgres() {
		t.Skip("needs PostgreSQL: set TEST_DATABASE_URL")
	}
	b := newPGBus(db.SQL, db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for round := 0; round < 2; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		ch1, err := b.Subscribe(ctx, topic, "cs_x")
		require.NoError(t, err)
		ch2, err := b.Subscribe(ctx, topic, "cs_x")
		require.NoError(t, err)
		ch3, err := b.Subscribe(ctx, otherTopic, "cs_x")
		require.NoError(t, err)
		b.mu.Lock()
		require.Len(t, b.cur.topics, 2)
		b.mu.Unlock()
		require.NoError(t, b.Publish(ctx, nil, topic, "cs_x", "pending"))
		require.NoError(t, b.Publish(ctx, nil, otherTopic, "cs_x", "other"))
		require.Equal(t, "pending", recvMessage(t, ch1))
		require.Equal(t, "pending", recvMessage(t, ch2))
		require.Equal(t, "other", recvMessage(t, ch3))
		cancel()
		for _, ch := range []<-chan string{ch1, ch2, ch3} {
			for range ch {
			}
		}
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.refs == 0 && b.cur == nil
		}, 5*time.Second, 10*time.Millisecond)
	}
}

// TestPublishRefuses what would not arrive as sent: an empty topic, a key
// with the separator, the Resync marker, a payload NOTIFY refuses.
func TestPublishRefuses(t *testing.T) {
	b := newLocalBus()
	for _, c := range []struct {
		name, key, message string
		topic              Topic
	}{
		{name: "empty topic", topic: "", key: "k", message: "m"},
		{name: "key with colon", topic: topic, key: "a:b", message: "m"},
		{name: "resync", topic: topic, key: "k", message: Resync},
		{name: "too long", topic: topic, key: "k", message: strings.Repeat("m", maxPayload-1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Error(t, b.Publish(context.Background(), nil, c.topic, c.key, c.message))
		})
	}
	require.NoError(t, b.Publish(context.Background(), nil, topic, "k", strings.Repeat("m", maxPayload-2)))
}
