package agentpay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/chains/adapters"
	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testdb/freshdb"
	"agentpay/internal/vault"
)

// rateClock is a settable clock for the limiter.
type rateClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *rateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *rateClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// rateEpoch is the start of an hour, so minute and hour windows start
// together.
var rateEpoch = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

// newRateService builds a service on db with the given IP limits and a clock
// set to rateEpoch.
func newRateService(t testing.TB, db *store.DB, ipLimit, registerLimit int) (*Service, *rateClock) {
	t.Helper()
	key, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	v, err := vault.New(key)
	require.NoError(t, err)
	svc, err := NewService(Config{
		DB: db, Vault: v, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Families: adapters.Families(),
		IPRateLimit: ipLimit, RegisterRateLimit: registerLimit,
	})
	require.NoError(t, err)
	clock := &rateClock{t: rateEpoch}
	svc.setRateClock(clock.Now)
	return svc, clock
}

// rateAgent is an agent as AllowAgent sees it: the limiter reads only the
// id and the tier.
func rateAgent(tier agent.Tier) *ent.Agent {
	return &ent.Agent{ID: uuid.New(), Tier: tier}
}

// allowAgentN calls AllowAgent n times and returns how many were allowed and the
// last decision and error.
func allowAgentN(t *testing.T, svc *Service, a *ent.Agent, n int) (allowed int, last RateDecision, lastErr error) {
	t.Helper()
	for range n {
		dec, err := svc.AllowAgent(context.Background(), a)
		if err != nil {
			require.ErrorIs(t, err, ErrRateLimited)
			require.False(t, dec.Allowed)
		} else {
			require.True(t, dec.Allowed)
			allowed++
		}
		last, lastErr = dec, err
	}
	return allowed, last, lastErr
}

func TestAllowAgentPerMinuteByTier(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 0, 0)
	clock.Set(rateEpoch.Add(15 * time.Second))

	tests := []struct {
		tier      agent.Tier
		perMinute int
	}{
		{agent.TierT0, 10},
		{agent.TierT1, 30},
		{agent.TierT2, 60},
		{agent.TierT3, 120},
		{agent.TierT4, 300},
	}
	for _, tt := range tests {
		t.Run(string(tt.tier), func(t *testing.T) {
			a := rateAgent(tt.tier)
			allowed, last, err := allowAgentN(t, svc, a, tt.perMinute)
			require.NoError(t, err)
			require.Equal(t, tt.perMinute, allowed)
			require.Equal(t, RateDecision{
				Allowed: true, Limit: tt.perMinute, Remaining: 0,
				Reset: rateEpoch.Add(time.Minute), Window: "minute",
			}, last)

			dec, err := svc.AllowAgent(context.Background(), a)
			require.ErrorIs(t, err, ErrRateLimited)
			var rerr *RateLimitError
			require.ErrorAs(t, err, &rerr)
			require.Equal(t, dec, rerr.Decision)
			require.Equal(t, RateDecision{
				Allowed: false, Limit: tt.perMinute, Remaining: 0,
				Reset: rateEpoch.Add(time.Minute), RetryAfter: 45 * time.Second, Window: "minute",
			}, dec)
			require.Contains(t, err.Error(), "rate limit exceeded")
		})
	}
}

func TestAllowAgentDecision(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT0)

	// The first request: the minute window is the tighter one.
	dec, err := svc.AllowAgent(context.Background(), a)
	require.NoError(t, err)
	require.Equal(t, RateDecision{Allowed: true, Limit: 10, Remaining: 9, Reset: rateEpoch.Add(time.Minute), Window: "minute"}, dec)

	// A new minute starts a new minute window; the hour keeps counting.
	clock.Set(rateEpoch.Add(time.Minute + 30*time.Second))
	dec, err = svc.AllowAgent(context.Background(), a)
	require.NoError(t, err)
	require.Equal(t, 9, dec.Remaining)
	require.Equal(t, rateEpoch.Add(2*time.Minute), dec.Reset)

	// Another agent has its own counters.
	dec, err = svc.AllowAgent(context.Background(), rateAgent(agent.TierT0))
	require.NoError(t, err)
	require.Equal(t, 9, dec.Remaining)

	// An unknown tier gets T0's limits.
	dec, err = svc.AllowAgent(context.Background(), rateAgent("T9"))
	require.NoError(t, err)
	require.Equal(t, 10, dec.Limit)

	_, err = svc.AllowAgent(context.Background(), nil)
	require.Error(t, err)
}

func TestAllowAgentPerHour(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT0)

	// Minute 0: 30 requests, 10 allowed. The 20 refused ones do not count
	// against the hour.
	allowed, _, _ := allowAgentN(t, svc, a, 30)
	require.Equal(t, 10, allowed)

	// Minutes 1-9: 10 each, all allowed: 100 in the hour.
	for m := 1; m <= 9; m++ {
		clock.Set(rateEpoch.Add(time.Duration(m) * time.Minute))
		allowed, last, err := allowAgentN(t, svc, a, 10)
		require.NoError(t, err, "minute %d", m)
		require.Equal(t, 10, allowed)
		require.Equal(t, 0, last.Remaining, "minute %d", m)
	}

	// Minute 10: the minute window is fresh but the hour is spent; the
	// hour window refuses, until the hour ends.
	clock.Set(rateEpoch.Add(10*time.Minute + 20*time.Second))
	dec, err := svc.AllowAgent(context.Background(), a)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Equal(t, RateDecision{
		Allowed: false, Limit: 100, Remaining: 0,
		Reset: rateEpoch.Add(time.Hour), RetryAfter: 49*time.Minute + 40*time.Second, Window: "hour",
	}, dec)
	require.EqualError(t, err, "rate limit exceeded: 100 requests per hour for tier T0, retry after 2980 s")

	// The next hour starts afresh.
	clock.Set(rateEpoch.Add(time.Hour))
	dec, err = svc.AllowAgent(context.Background(), a)
	require.NoError(t, err)
	require.Equal(t, 9, dec.Remaining)
}

func TestAllowAgentHourFullWhileMinuteRefuses(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT0)

	// 90 requests over minutes 0-8, then 10 in minute 9: the hour is full
	// exactly as the minute is.
	for m := 0; m <= 9; m++ {
		clock.Set(rateEpoch.Add(time.Duration(m) * time.Minute))
		allowed, last, err := allowAgentN(t, svc, a, 10)
		require.NoError(t, err)
		require.Equal(t, 10, allowed)
		if m == 9 {
			// Both windows have 0 left: the hour binds longer and is shown.
			require.Equal(t, "hour", last.Window)
			require.Equal(t, 0, last.Remaining)
		}
	}
	// Refused by the minute (not counted in the hour), but the hour is full
	// too: Retry-After points at the end of the hour, not of the minute.
	dec, err := svc.AllowAgent(context.Background(), a)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Equal(t, "hour", dec.Window)
	require.Equal(t, rateEpoch.Add(time.Hour), dec.Reset)
}

func TestAllowAgentConcurrent(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, _ := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT0)

	const n = 40
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range n {
		wg.Go(func() {
			_, err := svc.AllowAgent(context.Background(), a)
			if err != nil && !errors.Is(err, ErrRateLimited) {
				t.Error(err)
				return
			}
			if err == nil {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 10, allowed)
}

// Two services over one PostgreSQL database are two API instances: they
// share the counters.
func TestAllowAgentSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	if !freshdb.IsPostgres() {
		t.Skip("counters are shared through PostgreSQL; SQLite runs one process")
	}
	db := testdb.Open(t)
	svc1, _ := newRateService(t, db, 0, 0)
	svc2, _ := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT0)

	allowed, _, _ := allowAgentN(t, svc1, a, 6)
	require.Equal(t, 6, allowed)
	allowed, last, _ := allowAgentN(t, svc2, a, 4)
	require.Equal(t, 4, allowed)
	require.Equal(t, 0, last.Remaining)
	_, err := svc2.AllowAgent(context.Background(), a)
	require.ErrorIs(t, err, ErrRateLimited)
	_, err = svc1.AllowAgent(context.Background(), a)
	require.ErrorIs(t, err, ErrRateLimited)
}

func TestAllowIP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		ipLimit        int
		registerLimit  int
		kind           RateKind
		calls          int
		wantAllowed    int
		wantLimit      int
		wantWindow     string
		wantReset      time.Time
		wantRetryAfter time.Duration
	}{
		{"requests per minute", 3, 0, RateRequest, 5, 3, 3, "minute", rateEpoch.Add(time.Minute), 50 * time.Second},
		{"registrations per hour", 0, 2, RateRegistration, 4, 2, 2, "hour", rateEpoch.Add(time.Hour), time.Hour - 10*time.Second},
		{"request limit off", 0, 2, RateRequest, 50, 50, 0, "", time.Time{}, 0},
		{"registration limit off", 3, 0, RateRegistration, 50, 50, 0, "", time.Time{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.Open(t)
			svc, clock := newRateService(t, db, tt.ipLimit, tt.registerLimit)
			clock.Set(rateEpoch.Add(10 * time.Second))
			var (
				allowed int
				last    RateDecision
			)
			for range tt.calls {
				dec, err := svc.AllowIP(context.Background(), "203.0.113.7", tt.kind)
				if err == nil {
					allowed++
				} else {
					require.ErrorIs(t, err, ErrRateLimited)
				}
				last = dec
			}
			require.Equal(t, tt.wantAllowed, allowed)
			if tt.wantLimit == 0 {
				require.Equal(t, RateDecision{Allowed: true}, last)
				return
			}
			require.Equal(t, RateDecision{
				Limit: tt.wantLimit, Reset: tt.wantReset, RetryAfter: tt.wantRetryAfter, Window: tt.wantWindow,
			}, last)

			// Another address has its own count.
			dec, err := svc.AllowIP(context.Background(), "203.0.113.8", tt.kind)
			require.NoError(t, err)
			require.Equal(t, tt.wantLimit-1, dec.Remaining)
		})
	}
}

func TestAllowIPKindsCountApart(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, _ := newRateService(t, db, 5, 1)
	ctx := context.Background()

	_, err := svc.AllowIP(ctx, "198.51.100.1", RateRegistration)
	require.NoError(t, err)
	_, err = svc.AllowIP(ctx, "198.51.100.1", RateRegistration)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Contains(t, err.Error(), "rate limit exceeded: 1 registrations per hour from this address, retry after ")
	// Registrations did not use up the request allowance.
	dec, err := svc.AllowIP(ctx, "198.51.100.1", RateRequest)
	require.NoError(t, err)
	require.Equal(t, 4, dec.Remaining)

	// IPv6 clients are counted per /64; IPv4-mapped addresses as IPv4.
	_, err = svc.AllowIP(ctx, "2001:db8:1:2::1", RateRegistration)
	require.NoError(t, err)
	_, err = svc.AllowIP(ctx, "2001:db8:1:2:ffff::9", RateRegistration)
	require.ErrorIs(t, err, ErrRateLimited)
	_, err = svc.AllowIP(ctx, "2001:db8:1:3::1", RateRegistration)
	require.NoError(t, err)
	_, err = svc.AllowIP(ctx, "::ffff:198.51.100.1", RateRegistration)
	require.ErrorIs(t, err, ErrRateLimited)

	_, err = svc.AllowIP(ctx, "198.51.100.1", RateKind("other"))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrRateLimited)
}

func TestIPScope(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:a:b:c:d:e:f", "2001:db8:a:b::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"@", "@"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ipScope(tt.in), tt.in)
	}
}

// Finished windows are deleted: from the table on PostgreSQL, from memory on
// SQLite.
func TestRateLimitCleanup(t *testing.T) {
	t.Parallel()
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 0, 0)
	ctx := context.Background()
	a := rateAgent(agent.TierT0)
	if store, ok := svc.rateLimiter().store.(*pgRateStore); ok {
		// No background cleanup in this test: it calls cleanup itself.
		store.nextCleanup.Store(math.MaxInt64)
	}

	_, err := svc.AllowAgent(ctx, a)
	require.NoError(t, err)
	clock.Set(rateEpoch.Add(2 * time.Minute))
	_, err = svc.AllowAgent(ctx, a)
	require.NoError(t, err)

	switch store := svc.rateLimiter().store.(type) {
	case *pgRateStore:
		// minute 0, minute 2 and the hour.
		require.Equal(t, 3, db.Ent.RateLimitCounter.Query().CountX(ctx))
		n, err := store.cleanup(ctx, clock.Now().Unix())
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		keys := db.Ent.RateLimitCounter.Query().Order(ent.Asc("key")).AllX(ctx)
		require.Len(t, keys, 2)
		require.Equal(t, "agent:"+a.ID.String()+":hour", keys[0].Key)
		require.Equal(t, "agent:"+a.ID.String()+":minute", keys[1].Key)
		require.Equal(t, rateEpoch.Add(2*time.Minute).Unix(), keys[1].WindowStart)
	case *memRateStore:
		// The second call swept (a minute after the first): minute 0 is gone.
		store.mu.Lock()
		defer store.mu.Unlock()
		require.Len(t, store.windows, 2)
		clock.Set(rateEpoch.Add(2 * time.Hour))
		store.sweep(clock.Now().Unix())
		require.Empty(t, store.windows)
	default:
		t.Fatalf("unexpected store %T", store)
	}
}

func TestPgRateSQL(t *testing.T) {
	t.Parallel()
	// Parameters are numbered 1..3n then the n-1 limits.
	q := pgRateSQL(2)
	require.Contains(t, q, "w1 AS (INSERT INTO rate_limit_counters")
	require.Contains(t, q, "FROM w0 WHERE w0.count <= $7::bigint")
	require.NotContains(t, q, "$8")
	require.NotContains(t, pgRateSQL(1), "$4")
}

// The statement turns synchronous_commit off for its own transaction only:
// the connection, shared with payments, keeps it on.
func TestPgRateSQLKeepsCommitsSynchronous(t *testing.T) {
	t.Parallel()
	if !freshdb.IsPostgres() {
		t.Skip("PostgreSQL only")
	}
	db := testdb.Open(t)
	ctx := context.Background()
	conn, err := db.SQL.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var count int64
	require.NoError(t, conn.QueryRowContext(ctx, pgRateSQL(1), "k:minute", int64(60), int64(120)).Scan(&count))
	require.EqualValues(t, 1, count)
	var setting string
	require.NoError(t, conn.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&setting))
	require.Equal(t, "on", setting)
}
