package headcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/clock"
)

// However many read at once, a stale key costs one fetch, and none while
// fresh; a failure is kept as long as an answer.
func TestOneFetchPerTTL(t *testing.T) {
	clk := clock.NewStub(time.Unix(1_000, 0))
	c := newCache[string](time.Second, clk.Now)
	var calls atomic.Int32
	release := make(chan struct{})
	fetch := func(context.Context) (uint64, error) {
		calls.Add(1)
		<-release
		return 42, nil
	}

	var wg sync.WaitGroup
	heads := make([]Head, 50)
	for i := range heads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			heads[i] = c.Get(context.Background(), "base", fetch)
		}()
	}
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	require.Equal(t, int32(1), calls.Load(), "one fetch for fifty readers")
	for _, h := range heads {
		require.Equal(t, uint64(42), h.Number)
		require.NoError(t, h.Err)
	}

	clk.Set(clk.Now().Add(999 * time.Millisecond))
	require.Equal(t, uint64(42), c.Get(context.Background(), "base", fetch).Number)
	require.Equal(t, int32(1), calls.Load(), "fresh: no fetch")

	clk.Set(clk.Now().Add(time.Millisecond))
	down := errors.New("node down")
	failing := func(context.Context) (uint64, error) { calls.Add(1); return 0, down }
	require.ErrorIs(t, c.Get(context.Background(), "base", failing).Err, down)
	require.ErrorIs(t, c.Get(context.Background(), "base", failing).Err, down)
	require.Equal(t, int32(2), calls.Load(), "a failure is kept for the TTL too")

	c.Put("base", 50)
	require.Equal(t, Head{Number: 50, At: clk.Now()}, c.Get(context.Background(), "base", failing))
	require.Equal(t, int32(2), calls.Load(), "a scan's head is fresh")
}

// A reader that gives up gets what there is; the refresh goes on for the
// others and lands.
func TestReaderGivingUpLeavesTheRefresh(t *testing.T) {
	c := New[string](time.Minute, clock.System)
	release := make(chan struct{})
	fetch := func(ctx context.Context) (uint64, error) {
		<-release
		return 7, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := c.Get(ctx, "solana", fetch)
	require.ErrorIs(t, h.Err, context.Canceled)
	close(release)
	require.Eventually(t, func() bool {
		return c.Get(context.Background(), "solana", fetch).Number == 7
	}, 5*time.Second, time.Millisecond)
}
