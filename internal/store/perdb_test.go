package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

// TestPerDBOneValuePerDB: every user of a DB gets the same value, made
// once even when first asked for concurrently; another DB has its own; a
// DB's values are released when it closes, the last made first, while the
// pool still answers.
func TestPerDBOneValuePerDB(t *testing.T) {
	t.Parallel()
	type value struct {
		db   *store.DB
		name string
	}
	var (
		mu       sync.Mutex
		made     int
		released []string
	)
	perDB := func(name string) *store.PerDB[*value] {
		return store.NewPerDB(func(db *store.DB) *value {
			mu.Lock()
			defer mu.Unlock()
			made++
			return &value{db: db, name: name}
		}, func(v *value) {
			require.NoError(t, v.db.Ping(context.Background()), "released before the pool closes")
			released = append(released, v.name)
		})
	}
	first, second := perDB("first"), perDB("second")

	a := testdb.Open(t)
	got := make([]*value, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = first.For(a) })
	}
	wg.Wait()
	for _, v := range got {
		require.Same(t, got[0], v)
	}
	require.Equal(t, 1, made, "made once for the DB")
	require.Same(t, a, got[0].db)

	b := testdb.Reopen(t, a)
	require.NotSame(t, got[0], first.For(b), "another DB, even on the same database, has its own")
	require.Same(t, b, first.For(b).db)

	second.For(a)
	require.NoError(t, a.Close())
	require.Equal(t, []string{"second", "first"}, released)

	// A value without anything to release.
	plain := store.NewPerDB(func(*store.DB) int { return 7 }, nil)
	require.Equal(t, 7, plain.For(b))
}
