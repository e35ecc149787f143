package agentpay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/ratelimitcounter"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testdb/freshdb"
)

func requireLeases(t *testing.T) {
	t.Helper()
	if !freshdb.IsPostgres() {
		t.Skip("leases share PostgreSQL counters between instances; SQLite counts in memory")
	}
}

// counterValue is the stored count of an agent's window (0 without a row).
func counterValue(t *testing.T, db *store.DB, a *ent.Agent, window string, start time.Time) int64 {
	t.Helper()
	c, err := db.Ent.RateLimitCounter.Query().
		Where(ratelimitcounter.Key(agentRateScope(a.ID.String())+":"+window), ratelimitcounter.WindowStart(start.Unix())).
		Only(context.Background())
	if ent.IsNotFound(err) {
		return 0
	}
	require.NoError(t, err)
	return int64(c.Count)
}

func TestLeaseSize(t *testing.T) {
	t.Parallel()
	// T0 and every minute limit but T4's reserve one hit at a time (exact).
	for _, limit := range []int{1, 10, 30, 60, 100, 120} {
		require.EqualValues(t, 1, leaseSize(limit), limit)
	}
	require.EqualValues(t, 9, leaseSize(300))
	require.EqualValues(t, 15, leaseSize(500))
	require.EqualValues(t, 312, leaseSize(10_000))

	// Bursts: four hits per request in progress, at most limit/8; one-hit
	// windows stay at one.
	require.EqualValues(t, 9, leaseWant(300, 1))
	require.EqualValues(t, 20, leaseWant(300, 5))
	require.EqualValues(t, 37, leaseWant(300, 16))
	require.EqualValues(t, 1, leaseWant(120, 16))
	require.EqualValues(t, 312, leaseWant(10_000, 16))
}

// A high tier reserves a block: the first request writes leaseSize hits to
// the counter, the next ones are served from the lease without writing.
func TestLeaseReservesBlocks(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	svc, _ := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT4)
	ctx := context.Background()

	// 4: the fifth would leave 4 of 9, low enough to reserve the next
	// block ahead.
	for i := 1; i <= 4; i++ {
		dec, err := svc.AllowAgent(ctx, a)
		require.NoError(t, err)
		// One instance: Remaining is exact.
		require.Equal(t, 300-i, dec.Remaining)
		require.Equal(t, "minute", dec.Window)
	}
	require.EqualValues(t, 9, counterValue(t, db, a, "minute", rateEpoch))
	require.EqualValues(t, 312, counterValue(t, db, a, "hour", rateEpoch))

	// T0 stays exact: one hit per request.
	t0 := rateAgent(agent.TierT0)
	_, err := svc.AllowAgent(ctx, t0)
	require.NoError(t, err)
	require.EqualValues(t, 1, counterValue(t, db, t0, "minute", rateEpoch))
	require.EqualValues(t, 1, counterValue(t, db, t0, "hour", rateEpoch))
}

// A reservation never takes the counter past the limit: with 295 of 300
// reserved elsewhere, the instance gets 5, serves 5 and refuses the 6th.
func TestLeaseCappedAtLimit(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	svc, _ := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT4)
	ctx := context.Background()
	db.Ent.RateLimitCounter.Create().
		SetKey(agentRateScope(a.ID.String()) + ":minute").SetWindowStart(rateEpoch.Unix()).
		SetCount(295).SetExpiresAt(rateEpoch.Unix() + 60).
		SaveX(ctx)

	allowed, last, err := allowAgentN(t, svc, a, 5)
	require.NoError(t, err)
	require.Equal(t, 5, allowed)
	require.Equal(t, 0, last.Remaining)
	_, err = svc.AllowAgent(ctx, a)
	require.ErrorIs(t, err, ErrRateLimited)
	require.EqualValues(t, 300, counterValue(t, db, a, "minute", rateEpoch))
	// The refused request used up nothing of the hour: 9 would be a second
	// block, only the first (312) was reserved.
	require.EqualValues(t, 312, counterValue(t, db, a, "hour", rateEpoch))
}

// Two instances serving one high-tier agent, interleaved and concurrent:
// together they never serve more than the limit, and leases held by one
// refuse at most a few hits early on the other.
func TestLeaseSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	svc1, _ := newRateService(t, db, 0, 0)
	svc2, _ := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT4)
	ctx := context.Background()

	// Interleaved, one at a time.
	allowed := 0
	for i := range 400 {
		svc := svc1
		if i%3 == 0 {
			svc = svc2
		}
		if _, err := svc.AllowAgent(ctx, a); err == nil {
			allowed++
		} else {
			require.ErrorIs(t, err, ErrRateLimited)
		}
	}
	require.LessOrEqual(t, allowed, 300)
	require.GreaterOrEqual(t, allowed, 300-int(leaseSize(300)))
	require.EqualValues(t, 300, counterValue(t, db, a, "minute", rateEpoch))

	// Concurrent, in a fresh minute: 8 clients on each instance.
	for _, svc := range []*Service{svc1, svc2} {
		svc.setRateClock(func() time.Time { return rateEpoch.Add(time.Minute) })
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for c := range 16 {
		svc := []*Service{svc1, svc2}[c%2]
		wg.Go(func() {
			for range 40 {
				_, err := svc.AllowAgent(ctx, a)
				if err != nil && !errors.Is(err, ErrRateLimited) {
					t.Error(err)
					return
				}
				if err == nil {
					mu.Lock()
					total++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, total, 300)
	require.GreaterOrEqual(t, total, 300-int(leaseSize(300)))
	require.EqualValues(t, 300, counterValue(t, db, a, "minute", rateEpoch.Add(time.Minute)))
	// Both minutes' requests, within the hour's leases.
	require.LessOrEqual(t, counterValue(t, db, a, "hour", rateEpoch), int64(allowed+total)+4*leaseSize(10_000))
}

// A new window starts a new lease; the hour's lease carries on across
// minutes until its own window ends.
func TestLeaseRenewsAcrossWindows(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 0, 0)
	a := rateAgent(agent.TierT4)
	ctx := context.Background()

	clock.Set(rateEpoch.Add(59 * time.Second))
	allowed, _, err := allowAgentN(t, svc, a, 3)
	require.NoError(t, err)
	require.Equal(t, 3, allowed)

	// Minute 1: a new minute lease (6 unserved hits of minute 0 are gone
	// with their window), the same hour lease.
	clock.Set(rateEpoch.Add(time.Minute))
	dec, err := svc.AllowAgent(ctx, a)
	require.NoError(t, err)
	require.Equal(t, 299, dec.Remaining)
	require.Equal(t, rateEpoch.Add(2*time.Minute), dec.Reset)
	require.EqualValues(t, 9, counterValue(t, db, a, "minute", rateEpoch))
	require.EqualValues(t, 9, counterValue(t, db, a, "minute", rateEpoch.Add(time.Minute)))
	require.EqualValues(t, 312, counterValue(t, db, a, "hour", rateEpoch))

	// The hour lease runs out after 312 requests, then is renewed.
	for m := 2; m <= 3; m++ {
		clock.Set(rateEpoch.Add(time.Duration(m) * time.Minute))
		allowed, _, err = allowAgentN(t, svc, a, 300)
		require.NoError(t, err)
		require.Equal(t, 300, allowed)
	}
	// 604 served: the hour has been renewed (reserved ahead of need, so
	// maybe one block more).
	hour := counterValue(t, db, a, "hour", rateEpoch)
	require.GreaterOrEqual(t, hour, int64(2*312))
	require.LessOrEqual(t, hour, int64(3*312))

	// The next hour: new leases for both windows.
	clock.Set(rateEpoch.Add(time.Hour))
	dec, err = svc.AllowAgent(ctx, a)
	require.NoError(t, err)
	require.Equal(t, 299, dec.Remaining)
	require.EqualValues(t, 312, counterValue(t, db, a, "hour", rateEpoch.Add(time.Hour)))
}

// A lease does not cache the key: a key regenerated on another instance is
// refused at once by the instance holding the agent's lease, and the new key
// goes on with the same lease.
func TestLeaseDoesNotCacheKeys(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	svc1, _ := newRateService(t, db, 0, 0)
	svc2, _ := newRateService(t, db, 0, 0)
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
	// statement, before the instance knows the agent), then blocks.
	require.LessOrEqual(t, counterValue(t, db, a, "minute", rateEpoch), int64(2+2*leaseSize(300)))

	// A tier change is seen at once too (the lease is of the old tier's
	// limits): T0's 100 an hour, which T4's hour lease already holds.
	db.Ent.Agent.Update().SetTier(agent.TierT0).ExecX(ctx)
	_, dec, err = svc1.AuthenticateAndAllow(ctx, newKey)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Equal(t, 100, dec.Limit)
	require.Equal(t, "hour", dec.Window)
}
