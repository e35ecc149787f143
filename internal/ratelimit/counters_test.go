package ratelimit

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/testdb"
)

// A scheme with a window without a limit is not leased: the counting
// statement (or the memory counters) counts the windows that have one, each
// only while the earlier ones let the request through.
func TestCountWithoutLeases(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	lim, setNow := newTestLimiter(t, db)
	scheme := tiers
	scheme.Windows = func(class string) []Window {
		w := tiers.Windows(class)
		if class == "T4" {
			w[0].Limit = 0
		}
		return w
	}
	l := NewLimit[uuid.UUID](lim, scheme, nil)
	require.Nil(t, l.leases)
	ctx := context.Background()

	t0 := tierSubject("T0")
	setNow(epoch.Add(15 * time.Second))
	allowed, last := allowN(t, l, t0, 15)
	require.Equal(t, 10, allowed)
	require.Equal(t, Decision{Limit: 10, Reset: epoch.Add(time.Minute), RetryAfter: 45 * time.Second, Window: "minute"}, last)
	// The 5 refused requests did not count in the hour.
	setNow(epoch.Add(time.Minute))
	dec, err := l.Allow(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, 9, dec.Remaining)
	require.Equal(t, "minute", dec.Window)

	// T4's minute has no limit: only its hour counts.
	dec, err = l.Allow(ctx, tierSubject("T4"))
	require.NoError(t, err)
	require.Equal(t, Decision{Allowed: true, Limit: 10_000, Remaining: 9_999, Reset: epoch.Add(time.Hour), Window: "hour"}, dec)
}

// Finished windows are deleted: from the table on PostgreSQL, from memory on
// SQLite.
func TestCounterCleanup(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	lim, setNow := newTestLimiter(t, db)
	l := NewLimit[uuid.UUID](lim, tiers, nil)
	ctx := context.Background()
	sub := tierSubject("T0")
	if lim.pg != nil {
		// No background cleanup in this test: it calls cleanup itself.
		lim.pg.nextCleanup.Store(math.MaxInt64)
	}

	_, err := l.Allow(ctx, sub)
	require.NoError(t, err)
	setNow(epoch.Add(2 * time.Minute))
	_, err = l.Allow(ctx, sub)
	require.NoError(t, err)

	switch store := lim.counters.(type) {
	case *pgCounters:
		// minute 0, minute 2 and the hour.
		require.Equal(t, 3, db.Ent.RateLimitCounter.Query().CountX(ctx))
		n, err := store.cleanup(ctx, epoch.Add(2*time.Minute).Unix())
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		keys := db.Ent.RateLimitCounter.Query().Order(ent.Asc("key")).AllX(ctx)
		require.Len(t, keys, 2)
		require.Equal(t, subjectKey(sub, "hour"), keys[0].Key)
		require.Equal(t, subjectKey(sub, "minute"), keys[1].Key)
		require.Equal(t, epoch.Add(2*time.Minute).Unix(), keys[1].WindowStart)
	case *memCounters:
		// The second call swept (a minute after the first): minute 0 is gone.
		store.mu.Lock()
		defer store.mu.Unlock()
		require.Len(t, store.windows, 2)
		store.sweep(epoch.Add(2 * time.Hour).Unix())
		require.Empty(t, store.windows)
	default:
		t.Fatalf("unexpected store %T", store)
	}
}

func TestCountSQL(t *testing.T) {
	t.Parallel()
	// Parameters are numbered 1..3n then the n-1 limits.
	q := countSQL(2)
	require.Contains(t, q, "w1 AS (INSERT INTO rate_limit_counters")
	require.Contains(t, q, "FROM w0 WHERE w0.count <= $7::bigint")
	require.NotContains(t, q, "$8")
	require.NotContains(t, countSQL(1), "$4")
}

// The statements turn synchronous_commit off for their own transaction
// only: the connection, shared with payments, keeps it on.
func TestStatementsKeepCommitsSynchronous(t *testing.T) {
	t.Parallel()
	if !testdb.IsPostgres() {
		t.Skip("PostgreSQL only")
	}
	db := testdb.Open(t)
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var count int64
	require.NoError(t, conn.QueryRowContext(ctx, countSQL(1), "k:minute", int64(60), int64(120)).Scan(&count))
	require.EqualValues(t, 1, count)
	var locked, after, seen *int64
	require.NoError(t, conn.QueryRowContext(ctx, minutely(600).Statements(nil).Reserve, "k", int64(60), int64(120), int64(18), int64(600)).
		Scan(&locked, &after, &seen))
	require.Nil(t, locked)
	require.EqualValues(t, 18, *after)
	var setting string
	require.NoError(t, conn.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting))
	require.Equal(t, "on", setting)
}
