package agentpay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/ratelimitcounter"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// rateEpoch is the start of an hour, so minute and hour windows start
// together.
var rateEpoch = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)

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
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc := newTestService(t, env, Config{})
	clock := env.Clock
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
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc := newTestService(t, env, Config{})
	clock := env.Clock
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
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc := newTestService(t, env, Config{})
	clock := env.Clock
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
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc := newTestService(t, env, Config{})
	clock := env.Clock
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
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc := newTestService(t, env, Config{})
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
	if !testdb.IsPostgres() {
		t.Skip("counters are shared through PostgreSQL; SQLite runs one process")
	}
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc1, svc2 := newTestService(t, env, Config{}), newTestService(t, env, Config{})
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
			env := testenv.New(t, testenv.Options{Clock: rateEpoch})
			svc := newTestService(t, env, Config{IPRateLimit: tt.ipLimit, RegisterRateLimit: tt.registerLimit})
			clock := env.Clock
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
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	svc := newTestService(t, env, Config{IPRateLimit: 5, RegisterRateLimit: 1})
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

// AuthenticateAndAllow follows the agent's key and tier while the agent's
// lease (PostgreSQL) serves its requests: a key regenerated on another
// instance is refused by the instance holding the lease once the
// regeneration has answered (it waits out the authentication cache), the
// new key goes on with the same lease, and a tier changed through the same
// DB applies to the next request (the change drops the cached agent).
func TestAuthenticateAndAllowFollowsKeysAndTiers(t *testing.T) {
	t.Parallel()
	if !testdb.IsPostgres() {
		t.Skip("leases share PostgreSQL counters between instances; SQLite counts in memory")
	}
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	db := env.DB
	svc1, svc2 := newTestService(t, env, Config{}), newTestService(t, env, Config{})
	ctx := context.Background()
	reg, err := svc1.QuickRegister(ctx, "leased")
	require.NoError(t, err)
	db.Ent.Agent.Update().SetTier(agent.TierT4).ExecX(ctx)

	for i := 1; i <= 3; i++ {
		a, dec, err := svc1.AuthenticateAndAllow(ctx, reg.APIKey)
		require.NoError(t, err)
		require.Equal(t, agent.TierT4, a.Tier)
		require.Len(t, a.Edges.Wallets, 2)
		require.Equal(t, 300-i, dec.Remaining)
	}
	a, err := svc2.Authenticate(ctx, reg.APIKey)
	require.NoError(t, err)
	newKey, err := svc2.RegenerateAPIKey(ctx, a)
	require.NoError(t, err)

	_, _, err = svc1.AuthenticateAndAllow(ctx, reg.APIKey)
	require.ErrorIs(t, err, ErrUnauthorized)
	_, dec, err := svc1.AuthenticateAndAllow(ctx, newKey)
	require.NoError(t, err)
	require.Equal(t, 296, dec.Remaining)
	// Reserved: a hit for each key's first request (read and reserved in one
	// statement, before the instance knows the agent), then blocks of 9.
	minute, err := db.Ent.RateLimitCounter.Query().
		Where(ratelimitcounter.Key("agent:"+a.ID.String()+":minute"), ratelimitcounter.WindowStart(rateEpoch.Unix())).
		Only(ctx)
	require.NoError(t, err)
	require.LessOrEqual(t, minute.Count, 2+2*9)

	// A tier change is seen at once too (the lease is of the old tier's
	// limits): T0's 100 an hour, which T4's hour lease already holds.
	db.Ent.Agent.Update().SetTier(agent.TierT0).ExecX(ctx)
	_, dec, err = svc1.AuthenticateAndAllow(ctx, newKey)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Equal(t, 100, dec.Limit)
	require.Equal(t, "hour", dec.Window)
}

// TestProbesAndConnectionsCountPerProcess: readiness probes and open
// connections are what one process serves, so each process counts its own
// (two services on one database stand for two API processes), while the
// request limit is shared.
func TestProbesAndConnectionsCountPerProcess(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{Clock: rateEpoch})
	process := func() *Service { return newTestService(t, env, Config{ProbeRateLimit: 2, ConnectionsPerIP: 1}) }
	one, two := process(), process()
	ctx := context.Background()
	for _, svc := range []*Service{one, two} {
		for range 2 {
			_, err := svc.AllowIP(ctx, "203.0.113.9", RateProbe)
			require.NoError(t, err)
		}
		dec, err := svc.AllowIP(ctx, "203.0.113.9", RateProbe)
		require.ErrorIs(t, err, ErrRateLimited)
		require.Equal(t, "minute", dec.Window)
	}

	release, err := one.OpenConnection("2001:db8::1")
	require.NoError(t, err)
	_, err = one.OpenConnection("2001:db8::2")
	require.ErrorIs(t, err, ErrRateLimited, "one /64 is one client")
	_, err = two.OpenConnection("2001:db8::2")
	require.NoError(t, err, "another process")
	release()
	_, err = one.OpenConnection("2001:db8::2")
	require.NoError(t, err, "a closed connection frees its place")
}
