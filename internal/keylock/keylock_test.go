package keylock

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every key locked and unlocked is forgotten: after many distinct keys,
// held one at a time and many at once, the locks hold no entry.
func TestLocksForgetReleasedKeys(t *testing.T) {
	var l Locks[int]
	ctx := context.Background()
	for i := range 1000 {
		unlock, err := l.Lock(ctx, i)
		require.NoError(t, err)
		require.Equal(t, 1, l.Len())
		unlock()
		unlock() // a second call does nothing
	}
	require.Zero(t, l.Len())

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.Lock(ctx, i%7)
			require.NoError(t, err)
			unlock()
		}()
	}
	wg.Wait()
	require.Zero(t, l.Len())
}

// One holder per key at a time: goroutines incrementing a counter under
// the same key never overlap; other keys do not wait for it.
func TestLocksExcludePerKey(t *testing.T) {
	var l Locks[string]
	ctx := context.Background()
	var inside, overlaps, total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.Lock(ctx, "session")
			require.NoError(t, err)
			defer unlock()
			mu.Lock()
			inside++
			if inside > 1 {
				overlaps++
			}
			mu.Unlock()
			runtime.Gosched() // let another in, were the lock not held
			mu.Lock()
			inside--
			total++
			mu.Unlock()
		}()
	}
	unlockOther, err := l.Lock(ctx, "other")
	require.NoError(t, err, "another key is free")
	wg.Wait()
	unlockOther()
	require.Zero(t, overlaps)
	require.Equal(t, 100, total)
	require.Zero(t, l.Len())
}

// A waiter whose context ends stops waiting, holds nothing and leaves no
// entry behind once the holder lets go.
func TestLockWaitEndsWithContext(t *testing.T) {
	var l Locks[string]
	unlock, err := l.Lock(context.Background(), "k")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = l.Lock(ctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, l.Len(), "the holder's entry only")
	unlock()
	require.Zero(t, l.Len())
	again, err := l.Lock(context.Background(), "k")
	require.NoError(t, err, "the waiter that gave up took nothing")
	again()
}
