package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/testdb"
)

// recvStatus waits for the next status on ch.
func recvStatus(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		require.True(t, ok, "channel closed")
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no status within 5s")
		return ""
	}
}

func requireNoStatus(t *testing.T, ch <-chan string) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("unexpected status %q", s)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestStatusBrokerDeliversOnCommitOnly holds for both brokers: the one
// NewStatusBroker picks for the test database (in-process on SQLite,
// LISTEN/NOTIFY on PostgreSQL).
func TestStatusBrokerDeliversOnCommitOnly(t *testing.T) {
	db := testdb.Open(t)
	b := NewStatusBroker(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := b.Subscribe(ctx, "cs_a")
	require.NoError(t, err)
	other, err := b.Subscribe(ctx, "cs_b")
	require.NoError(t, err)

	// Held back until the commit; a nested WithTx joins the outer one.
	committed := make(chan struct{})
	err = db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, b.Publish(ctx, sqlTx, "cs_a", "detecting"))
		require.NoError(t, db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
			return b.Publish(ctx, sqlTx, "cs_a", "confirming")
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
	require.Equal(t, "detecting", recvStatus(t, ch))
	require.Equal(t, "confirming", recvStatus(t, ch))

	// Never after a rollback.
	err = db.WithTx(ctx, func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, b.Publish(ctx, sqlTx, "cs_a", "cancelled"))
		return errors.New("roll back")
	})
	require.Error(t, err)
	requireNoStatus(t, ch)

	// Outside a transaction: at once. Other sessions' subscribers see
	// nothing of cs_a.
	require.NoError(t, b.Publish(ctx, nil, "cs_a", "expired"))
	require.Equal(t, "expired", recvStatus(t, ch))
	requireNoStatus(t, other)

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

// TestPGStatusBrokerListenerLifecycle: the listener connection exists only
// while there are subscribers, and a new one works after the last left.
func TestPGStatusBrokerListenerLifecycle(t *testing.T) {
	db := testdb.Open(t)
	if !db.IsPostgres() {
		t.Skip("needs PostgreSQL: set TEST_DATABASE_URL")
	}
	b := newPGStatusBroker(db.SQL, db.URL, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for round := 0; round < 2; round++ {
		ctx, cancel := context.WithCancel(context.Background())
		ch1, err := b.Subscribe(ctx, "cs_x")
		require.NoError(t, err)
		ch2, err := b.Subscribe(ctx, "cs_x")
		require.NoError(t, err)
		require.NoError(t, b.Publish(ctx, nil, "cs_x", "pending"))
		require.Equal(t, "pending", recvStatus(t, ch1))
		require.Equal(t, "pending", recvStatus(t, ch2))
		cancel()
		for range ch1 {
		}
		for range ch2 {
		}
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.refs == 0 && b.cur == nil
		}, 5*time.Second, 10*time.Millisecond)
	}
}
