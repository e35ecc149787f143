package headroom

import (
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
		free    int           // headroom the count found
		after   time.Duration // time between the count and the takes
		granted int           // of 1,000 takes
	}{
		{"never counted", -1, 0, 0},
		{"half the headroom", 1000, 0, 500},
		{"odd headroom rounds down", 129, 0, 64},
		{"at the minimum", 64, 0, 32},
		{"below the minimum every use is counted", 63, 0, 0},
		{"at the cap", 0, 0, 0},
		{"a count older than the TTL is not spent", 1000, time.Second, 0},
		{"within the TTL", 1000, 999 * time.Millisecond, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock = time.Unix(0, 0)
			c := newCache()
			if tc.free >= 0 {
				c.Counted("k", tc.free)
			}
			clock = clock.Add(tc.after)
			require.Equal(t, tc.granted, takes(c, "k", 1000))
			require.Zero(t, takes(c, "other", 10), "keys are apart")
		})
	}

	t.Run("a new count replaces the old grant", func(t *testing.T) {
		clock = time.Unix(0, 0)
		c := newCache()
		c.Counted("k", 1000)
		require.Equal(t, 10, takes(c, "k", 10))
		c.Counted("k", 100)
		require.Equal(t, 50, takes(c, "k", 1000))
	})
}
