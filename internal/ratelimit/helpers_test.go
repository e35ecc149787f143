package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/ratelimitcounter"
	"agentpay/internal/clock"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// epoch is the start of an hour, so minute and hour windows start
// together.
var epoch = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

// newTestLimiter is one instance's limiter on db, its clock at epoch until
// set.
func newTestLimiter(t testing.TB, db *store.DB) (lim *Limiter, set func(time.Time)) {
	t.Helper()
	clk := clock.NewStub(epoch)
	return New(db, discardLogger, clk), clk.Set
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTierLimit is one instance's limit of tiers on a database of its own,
// with leases (PostgreSQL only).
func newTierLimit(t *testing.T) (*store.DB, *Limit[uuid.UUID], func(time.Time)) {
	t.Helper()
	requireLeases(t)
	db := testdb.Open(t)
	lim, set := newTestLimiter(t, db)
	return db, NewLimit[uuid.UUID](lim, tiers, nil), set
}

// tiers is a scheme shaped like the agents' one: a minute and an hour
// window with limits by class (T0 below leaseMinLimit in both, T4 above),
// blocks growing with bursts.
var tiers = Scheme{
	Name: "agent", IDType: "uuid", Classes: []string{"T0", "T4"}, ClassColumn: "tier", Bursts: true,
	Windows: func(class string) []Window {
		perMinute, perHour := 10, 100
		if class == "T4" {
			perMinute, perHour = 300, 10_000
		}
		return []Window{{Name: "minute", Seconds: 60, Limit: perMinute}, {Name: "hour", Seconds: 3600, Limit: perHour}}
	},
}

// fixed is a scheme shaped like the per-IP ones: one window of a fixed
// limit, with text ids.
func fixed(w Window) Scheme {
	return Scheme{Name: "ip", IDType: "text", Windows: func(string) []Window { return []Window{w} }}
}

func minutely(limit int) Scheme {
	return fixed(Window{Name: "minute", Seconds: 60, Limit: limit})
}

func tierSubject(class string) Subject[uuid.UUID] {
	return Subject[uuid.UUID]{ID: uuid.New(), Class: class}
}

// allowN calls Allow n times and returns how many were allowed and the
// last decision.
func allowN[K comparable](t *testing.T, l *Limit[K], sub Subject[K], n int) (allowed int, last Decision) {
	t.Helper()
	for range n {
		dec, err := l.Allow(context.Background(), sub)
		require.NoError(t, err)
		if dec.Allowed {
			allowed++
		}
		last = dec
	}
	return allowed, last
}

// counterValue is the stored count of a counter key's window (0 without a
// row).
func counterValue(t *testing.T, db *store.DB, key string, start time.Time) int64 {
	t.Helper()
	c, err := db.Ent.RateLimitCounter.Query().
		Where(ratelimitcounter.Key(key), ratelimitcounter.WindowStart(start.Unix())).
		Only(context.Background())
	if ent.IsNotFound(err) {
		return 0
	}
	require.NoError(t, err)
	return int64(c.Count)
}

// subjectKey is the counter key of a tiers subject's window.
func subjectKey(sub Subject[uuid.UUID], window string) string {
	return "agent:" + sub.ID.String() + ":" + window
}

func requireLeases(t *testing.T) {
	t.Helper()
	if !testdb.IsPostgres() {
		t.Skip("leases share PostgreSQL counters between instances; SQLite counts in memory")
	}
}
