package headroom

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCache(t *testing.T) {
	clock := time.Unix(0, 0)
	newCache := func() *Cache[string] {
		c := New[string](Config{TTL: time.Second, Min: 64})
		c.now = func() time.Time { return clock }
		return c
	}
	takes := func(c *Cache[string], key string, n int) int {
		granted := 0
		for range n {
			if c.Take(key) {
				granted++
			}
		}
		return granted
	}

	for _, tc := range []struct {
		name    string
		held    int           // what the count found, of a cap of 1,000
		after   time.Duration // time between the count and the takes
		fits    bool          // the counted use
		granted int           // of 1,000 takes
	}{
		{"never counted", -1, 0, false, 0},
		{"half the headroom after the counted use", 0, 0, true, 499},
		{"at the minimum", 1000 - 65, 0, true, 32},
		{"below the minimum every use is counted", 1000 - 64, 0, true, 0},
		{"the last place", 999, 0, true, 0},
		{"at the cap", 1000, 0, false, 0},
		{"a count older than the TTL is not spent", 0, time.Second, true, 0},
		{"within the TTL", 0, 999 * time.Millisecond, true, 499},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock = time.Unix(0, 0)
			c := newCache()
			if tc.held >= 0 {
				require.Equal(t, tc.fits, c.Count("k", tc.held, 1000))
			}
			clock = clock.Add(tc.after)
			require.Equal(t, tc.granted, takes(c, "k", 1000))
			require.Zero(t, takes(c, "other", 10), "keys are apart")
		})
	}

	t.Run("grants in flight count until done", func(t *testing.T) {
		clock = time.Unix(0, 0)
		c := newCache()
		require.True(t, c.Count("k", 800, 1000))
		require.Equal(t, 99, takes(c, "k", 1000))
		// None of the 99 is visible to a count yet: 800 held + 99 in
		// flight leaves 101, so 50 more grants after this use.
		require.True(t, c.Count("k", 800, 1000))
		require.Equal(t, 50, takes(c, "k", 1000))
		for range 149 {
			c.Done("k")
		}
		require.True(t, c.Count("k", 949, 1000), "the done ones are now counted by the caller")
		require.Equal(t, 0, takes(c, "k", 1000), "50 left: below the minimum")
		require.False(t, c.Count("k", 1000, 1000))
	})

	t.Run("one process never passes the cap", func(t *testing.T) {
		clock = time.Unix(0, 0)
		c := newCache()
		var (
			mu   sync.Mutex // the caller's lock around a counted use
			held int        // what a count sees: finished uses
			wg   sync.WaitGroup
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					if c.Take("k") {
						mu.Lock()
						held++
						mu.Unlock()
						c.Done("k")
						continue
					}
					mu.Lock()
					if c.Count("k", held, 1000) {
						held++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1000, held)
	})
}
