package clock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStubMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	c := NewStub(start)
	require.Equal(t, start, c.Now())
	require.Equal(t, start, c.Now(), "stands still between moves")
	c.Advance(90 * time.Second)
	require.Equal(t, start.Add(90*time.Second), c.Now())
	c.Advance(-time.Minute)
	require.Equal(t, start.Add(30*time.Second), c.Now())
	c.Set(start.Add(time.Hour))
	require.Equal(t, start.Add(time.Hour), c.Now())
}

func TestStubIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	c := NewStub(start)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	require.Equal(t, start.Add(800*time.Second), c.Now())
}

func TestSystemAndFunc(t *testing.T) {
	t.Parallel()
	before := time.Now()
	now := System.Now()
	require.False(t, now.Before(before), "the system clock reads the real time")
	require.False(t, time.Now().Before(now))

	fixed := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, fixed, Func(func() time.Time { return fixed }).Now())
}
