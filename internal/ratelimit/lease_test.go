package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/internal/testdb"
)

func TestLeaseSize(t *testing.T) {
	t.Parallel()
	// Limits under leaseMinLimit reserve one hit at a time (exact).
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

// A high class reserves a block: the first request writes leaseSize hits
// to the counter, the next ones are served from the lease without writing.
func TestLeaseReservesBlocks(t *testing.T) {
	t.Parallel()
	db, l, _ := newTierLimit(t)
	sub := tierSubject("T4")
	ctx := context.Background()

	// 4: the fifth would leave 4 of 9, low enough to reserve the next
	// block ahead.
	for i := 1; i <= 4; i++ {
		dec, err := l.Allow(ctx, sub)
		require.NoError(t, err)
		// One instance: Remaining is exact.
		require.Equal(t, 300-i, dec.Remaining)
		require.Equal(t, "minute", dec.Window)
	}
	require.EqualValues(t, 9, counterValue(t, db, subjectKey(sub, "minute"), epoch))
	require.EqualValues(t, 312, counterValue(t, db, subjectKey(sub, "hour"), epoch))

	// T0 stays exact: one hit per request.
	t0 := tierSubject("T0")
	_, err := l.Allow(ctx, t0)
	require.NoError(t, err)
	require.EqualValues(t, 1, counterValue(t, db, subjectKey(t0, "minute"), epoch))
	require.EqualValues(t, 1, counterValue(t, db, subjectKey(t0, "hour"), epoch))
}

// A reservation never takes the counter past the limit: with 295 of 300
// reserved elsewhere, the instance gets 5, serves 5 and refuses the 6th.
func TestLeaseCappedAtLimit(t *testing.T) {
	t.Parallel()
	db, l, _ := newTierLimit(t)
	sub := tierSubject("T4")
	ctx := context.Background()
	db.Ent.RateLimitCounter.Create().
		SetKey(subjectKey(sub, "minute")).SetWindowStart(epoch.Unix()).
		SetCount(295).SetExpiresAt(epoch.Unix() + 60).
		SaveX(ctx)

	allowed, last := allowN(t, l, sub, 5)
	require.Equal(t, 5, allowed)
	require.Equal(t, 0, last.Remaining)
	dec, err := l.Allow(ctx, sub)
	require.NoError(t, err)
	require.False(t, dec.Allowed)
	require.EqualValues(t, 300, counterValue(t, db, subjectKey(sub, "minute"), epoch))
	// The refused request used up nothing of the hour: 9 would be a second
	// block, only the first (312) was reserved.
	require.EqualValues(t, 312, counterValue(t, db, subjectKey(sub, "hour"), epoch))
}

// Two instances serving one high-class subject, interleaved and
// concurrent: together they never serve more than the limit, and leases
// held by one refuse at most a few hits early on the other.
func TestLeaseSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	lim1, setNow1 := newTestLimiter(t, db)
	lim2, setNow2 := newTestLimiter(t, db)
	one, two := NewLimit[uuid.UUID](lim1, tiers, nil), NewLimit[uuid.UUID](lim2, tiers, nil)
	sub := tierSubject("T4")
	ctx := context.Background()

	// Interleaved, one at a time.
	allowed := 0
	for i := range 400 {
		l := one
		if i%3 == 0 {
			l = two
		}
		dec, err := l.Allow(ctx, sub)
		require.NoError(t, err)
		if dec.Allowed {
			allowed++
		}
	}
	require.LessOrEqual(t, allowed, 300)
	require.GreaterOrEqual(t, allowed, 300-int(leaseSize(300)))
	require.EqualValues(t, 300, counterValue(t, db, subjectKey(sub, "minute"), epoch))

	// Concurrent, in a fresh minute: 8 clients on each instance.
	setNow1(epoch.Add(time.Minute))
	setNow2(epoch.Add(time.Minute))
	var (
		wg    sync.WaitGroup
		total atomic.Int64
	)
	for c := range 16 {
		l := []*Limit[uuid.UUID]{one, two}[c%2]
		wg.Go(func() {
			for range 40 {
				dec, err := l.Allow(ctx, sub)
				if err != nil {
					t.Error(err)
					return
				}
				if dec.Allowed {
					total.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, total.Load(), int64(300))
	require.GreaterOrEqual(t, total.Load(), 300-leaseSize(300))
	require.EqualValues(t, 300, counterValue(t, db, subjectKey(sub, "minute"), epoch.Add(time.Minute)))
	// Both minutes' requests, within the hour's leases.
	require.LessOrEqual(t, counterValue(t, db, subjectKey(sub, "hour"), epoch), int64(allowed)+total.Load()+4*leaseSize(10_000))
}

// A new window starts a new lease; the hour's lease carries on across
// minutes until its own window ends. A new class starts a new lease too.
func TestLeaseRenewsAcrossWindows(t *testing.T) {
	t.Parallel()
	db, l, setNow := newTierLimit(t)
	sub := tierSubject("T4")
	ctx := context.Background()

	setNow(epoch.Add(59 * time.Second))
	allowed, _ := allowN(t, l, sub, 3)
	require.Equal(t, 3, allowed)

	// Minute 1: a new minute lease (6 unserved hits of minute 0 are gone
	// with their window), the same hour lease.
	setNow(epoch.Add(time.Minute))
	dec, err := l.Allow(ctx, sub)
	require.NoError(t, err)
	require.Equal(t, 299, dec.Remaining)
	require.Equal(t, epoch.Add(2*time.Minute), dec.Reset)
	require.EqualValues(t, 9, counterValue(t, db, subjectKey(sub, "minute"), epoch))
	require.EqualValues(t, 9, counterValue(t, db, subjectKey(sub, "minute"), epoch.Add(time.Minute)))
	require.EqualValues(t, 312, counterValue(t, db, subjectKey(sub, "hour"), epoch))

	// The hour lease runs out after 312 requests, then is renewed.
	for m := 2; m <= 3; m++ {
		setNow(epoch.Add(time.Duration(m) * time.Minute))
		allowed, _ = allowN(t, l, sub, 300)
		require.Equal(t, 300, allowed)
	}
	// 604 served: the hour has been renewed (reserved ahead of need, so
	// maybe one block more).
	hour := counterValue(t, db, subjectKey(sub, "hour"), epoch)
	require.GreaterOrEqual(t, hour, int64(2*312))
	require.LessOrEqual(t, hour, int64(3*312))

	// Another class: a new lease of its limits, which the hour's counter
	// (reserved under T4's) already passes.
	dec, err = l.Allow(ctx, Subject[uuid.UUID]{ID: sub.ID, Class: "T0"})
	require.NoError(t, err)
	require.Equal(t, Decision{Limit: 100, Reset: epoch.Add(time.Hour), RetryAfter: 57 * time.Minute, Window: "hour"}, dec)

	// The next hour: new leases for both windows.
	setNow(epoch.Add(time.Hour))
	dec, err = l.Allow(ctx, sub)
	require.NoError(t, err)
	require.Equal(t, 299, dec.Remaining)
	require.EqualValues(t, 312, counterValue(t, db, subjectKey(sub, "hour"), epoch.Add(time.Hour)))
}

// A one-window scheme of a fixed limit (per-IP requests) reserves blocks:
// the first request writes leaseSize(limit) hits, the next ones are served
// from memory until half the block is used, then the next block is
// reserved ahead; its blocks do not grow with bursts. A limit below
// leaseMinLimit (registrations) reserves one hit at a time.
func TestFixedLimitLeases(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	lim, setNow := newTestLimiter(t, db)
	requests := NewLimit[string](lim, minutely(600), nil)
	registrations := NewLimit[string](lim, fixed(Window{Name: "hour", Key: "register", Seconds: 3600, Limit: 20}), nil)
	ctx := context.Background()
	sub := Subject[string]{ID: "203.0.113.7"}
	key := "ip:203.0.113.7:"

	for i := 1; i <= 8; i++ {
		dec, err := requests.Allow(ctx, sub)
		require.NoError(t, err)
		require.Equal(t, 600-i, dec.Remaining, "one instance: exact")
	}
	require.EqualValues(t, 18, counterValue(t, db, key+"minute", epoch))
	// The ninth leaves 9 of 18: the next block is reserved in the background.
	_, err := requests.Allow(ctx, sub)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return counterValue(t, db, key+"minute", epoch) == 36 },
		5*time.Second, 10*time.Millisecond)

	for i := 1; i <= 3; i++ {
		dec, err := registrations.Allow(ctx, sub)
		require.NoError(t, err)
		require.Equal(t, "hour", dec.Window)
		require.EqualValues(t, i, counterValue(t, db, key+"register", epoch), "exact: one hit a registration")
	}

	// A new window starts a new lease.
	setNow(epoch.Add(time.Minute))
	dec, err := requests.Allow(ctx, sub)
	require.NoError(t, err)
	require.Equal(t, 599, dec.Remaining)
	require.EqualValues(t, 18, counterValue(t, db, key+"minute", epoch.Add(time.Minute)))
}

// Two instances, each with its own pool and leases, serving one subject of
// a fixed limit at once: together they never allow more than the limit,
// they refuse at most what the other holds early, and every refusal says
// when to retry.
func TestFixedLimitNeverPassedAcrossInstances(t *testing.T) {
	t.Parallel()
	requireLeases(t)
	db := testdb.Open(t)
	const limit = 400 // blocks of 12
	lim1, _ := newTestLimiter(t, db)
	lim2, _ := newTestLimiter(t, testdb.Reopen(t, db))
	one, two := NewLimit[string](lim1, minutely(limit), nil), NewLimit[string](lim2, minutely(limit), nil)
	ctx := context.Background()
	sub := Subject[string]{ID: "2001:db8::/64"}

	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		l := one
		if g%2 == 1 {
			l = two
		}
		wg.Go(func() {
			for range 50 {
				dec, err := l.Allow(ctx, sub)
				switch {
				case err != nil:
					t.Error(err)
					return
				case dec.Allowed:
					allowed.Add(1)
				case dec.RetryAfter <= 0 || dec.Window != "minute":
					t.Errorf("refusal: %+v", dec)
					return
				default:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 800, allowed.Load()+refused.Load())
	require.LessOrEqual(t, allowed.Load(), int64(limit), "never over the limit")
	require.GreaterOrEqual(t, allowed.Load(), limit-2*leaseSize(limit), "early refusals bounded by what the instances hold")
	require.LessOrEqual(t, counterValue(t, db, "ip:"+sub.ID+":minute", epoch), int64(limit))
}
