package agentpay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/ratelimitcounter"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// ipCounterValue is the stored count of an address's window (0 without a
// row).
func ipCounterValue(t *testing.T, db *store.DB, ip, window string, start time.Time) int64 {
	t.Helper()
	c, err := db.Ent.RateLimitCounter.Query().
		Where(ratelimitcounter.Key("ip:"+ipScope(ip)+":"+window), ratelimitcounter.WindowStart(start.Unix())).
		Only(context.Background())
	if ent.IsNotFound(err) {
		return 0
	}
	require.NoError(t, err)
	return int64(c.Count)
}

// Per-IP request limits reserve blocks: the first request writes
// leaseSize(limit) hits, the next ones are served from memory until half the
// block is used, then the next block is reserved ahead. Registrations (a
// limit below leaseMinLimit) reserve one hit at a time.
func TestIPLeaseReservesBlocks(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	svc, clock := newRateService(t, db, 600, 20)
	ctx := context.Background()
	const ip = "203.0.113.7"

	for i := 1; i <= 8; i++ {
		dec, err := svc.AllowIP(ctx, ip, RateRequest)
		require.NoError(t, err)
		require.Equal(t, 600-i, dec.Remaining, "one instance: exact")
	}
	require.EqualValues(t, 18, ipCounterValue(t, db, ip, "minute", rateEpoch))
	// The ninth leaves 9 of 18: the next block is reserved in the background.
	_, err := svc.AllowIP(ctx, ip, RateRequest)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ipCounterValue(t, db, ip, "minute", rateEpoch) == 36 },
		5*time.Second, 10*time.Millisecond)

	for i := 1; i <= 3; i++ {
		_, err := svc.AllowIP(ctx, ip, RateRegistration)
		require.NoError(t, err)
		require.EqualValues(t, i, ipCounterValue(t, db, ip, "register", rateEpoch), "exact: one hit a registration")
	}

	// A new window starts a new lease.
	clock.Set(rateEpoch.Add(time.Minute))
	dec, err := svc.AllowIP(ctx, ip, RateRequest)
	require.NoError(t, err)
	require.Equal(t, 599, dec.Remaining)
	require.EqualValues(t, 18, ipCounterValue(t, db, ip, "minute", rateEpoch.Add(time.Minute)))
}

// Two instances, each with its own pool and leases, serving one address at
// once: together they never allow more than the limit, they refuse at most
// what the other holds early, and every refusal says when to retry.
func TestIPLeaseNeverPassesTheLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	const limit = 400 // blocks of 12
	one, _ := newRateService(t, db, limit, 0)
	two, _ := newRateService(t, testdb.Reopen(t, db), limit, 0)
	ctx := context.Background()
	const ip = "2001:db8::1"

	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		svc := one
		if g%2 == 1 {
			svc = two
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				dec, err := svc.AllowIP(ctx, ip, RateRequest)
				if err != nil {
					if !assertRefusal(t, err, dec) {
						return
					}
					refused.Add(1)
					continue
				}
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 800, allowed.Load()+refused.Load())
	require.LessOrEqual(t, allowed.Load(), int64(limit), "never over the limit")
	require.GreaterOrEqual(t, allowed.Load(), int64(limit-2*leaseSize(limit)), "early refusals bounded by what the instances hold")
	require.LessOrEqual(t, ipCounterValue(t, db, ip, "minute", rateEpoch), int64(limit))
}

func assertRefusal(t *testing.T, err error, dec RateDecision) bool {
	t.Helper()
	ok := true
	if !errors.Is(err, ErrRateLimited) || dec.Allowed || dec.RetryAfter <= 0 || dec.Window != "minute" {
		t.Errorf("refusal: %v %+v", err, dec)
		ok = false
	}
	return ok
}
