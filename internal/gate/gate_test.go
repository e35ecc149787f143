package gate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGateLimit: a key takes limit holders; other keys are apart; a place
// left is free again; a key nobody holds leaves nothing behind.
func TestGateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := New[string](2, 0)
	require.True(t, g.Enter(ctx, "a", time.Hour))
	require.True(t, g.Enter(ctx, "a", time.Hour))
	require.False(t, g.Enter(ctx, "a", time.Hour), "no waiters allowed: turned away at once")
	require.True(t, g.Enter(ctx, "b", 0))
	require.Equal(t, 2, g.Holders("a"))
	g.Leave("a")
	require.True(t, g.Enter(ctx, "a", 0))
	g.Leave("a")
	g.Leave("a")
	g.Leave("b")
	require.Zero(t, g.Holders("a"))
	require.Empty(t, g.gates)
	require.Panics(t, func() { g.Leave("a") })
}

// TestGateWaiters: a caller at a full key waits for a holder to leave and
// takes its place; no more than maxWaiting wait, the others are turned
// away at once; a wait ends with its time or its context.
func TestGateWaiters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := New[string](1, 1)
	require.True(t, g.Enter(ctx, "a", 0))

	entered := make(chan bool)
	go func() { entered <- g.Enter(ctx, "a", time.Minute) }()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.gates["a"].waiting == 1 }, 10*time.Second, time.Millisecond)
	require.False(t, g.Enter(ctx, "a", time.Minute), "the one waiter's place is taken")
	g.Leave("a")
	require.True(t, <-entered, "the waiter took the place left")
	require.Equal(t, 1, g.Holders("a"))

	start := time.Now()
	require.False(t, g.Enter(ctx, "a", 20*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "it waited its time")
	cancelled, cancel := context.WithCancel(ctx)
	go func() { entered <- g.Enter(cancelled, "a", time.Hour) }()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.gates["a"].waiting == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.False(t, <-entered)
	g.Leave("a")
	require.Empty(t, g.gates)
}

// TestGateNeverPassesLimit: callers racing for a key never hold more than
// its limit at once, and every waiter that is let in had a place.
func TestGateNeverPassesLimit(t *testing.T) {
	t.Parallel()
	const limit = 3
	g := New[int](limit, 4)
	var (
		mu         sync.Mutex
		held, most int
		wg         sync.WaitGroup
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if !g.Enter(context.Background(), 7, time.Second) {
					continue
				}
				mu.Lock()
				held++
				most = max(most, held)
				mu.Unlock()
				time.Sleep(50 * time.Microsecond)
				mu.Lock()
				held--
				mu.Unlock()
				g.Leave(7)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, limit, most)
	require.Empty(t, g.gates)
}

// TestEnterUnder: a caller may hold a key to fewer holders than the gates'
// limit (and wait under that bound), the others keeping theirs.
func TestEnterUnder(t *testing.T) {
	ctx := context.Background()
	g := New[string](3, 1)
	require.True(t, g.EnterUnder(ctx, "a", 1, 0))
	require.False(t, g.EnterUnder(ctx, "a", 1, 0), "one holder under a limit of 1")
	require.True(t, g.Enter(ctx, "a", 0), "the gates' own limit is 3")
	require.Equal(t, 2, g.Holders("a"))
	waited := make(chan bool)
	go func() { waited <- g.EnterUnder(ctx, "a", 2, time.Minute) }()
	require.Eventually(t, func() bool { return waiting(g, "a") == 1 }, 10*time.Second, time.Millisecond)
	g.Leave("a")
	require.True(t, <-waited, "a leave lets a waiter in under its own limit")
	require.Equal(t, 2, g.Holders("a"))
	g.Leave("a")
	g.Leave("a")
	require.Zero(t, g.Holders("a"))
}

func waiting[K comparable](g *Gates[K], key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt := g.gates[key]; gt != nil {
		return gt.waiting
	}
	return 0
}
