package authcache

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
)

// owned is a cached value: an owner and what was read of it.
type owned struct {
	owner uuid.UUID
	names []string
}

func newTestCache(ttl time.Duration) *Cache[*owned] {
	return New(ttl, func(v *owned) uuid.UUID { return v.owner }, func(v *owned) *owned {
		out := *v
		out.names = append([]string(nil), v.names...)
		return &out
	})
}

func TestCacheRules(t *testing.T) {
	t.Parallel()
	one, two := uuid.New(), uuid.New()
	tests := []struct {
		name string
		// run acts on a cache holding nothing, with a value of owner `one`
		// read by put under "k1"; it reports whether "k1" is then served.
		run  func(c *Cache[*owned], put func(Read))
		want bool
	}{
		{"read, stored, served", func(c *Cache[*owned], put func(Read)) { put(c.Begin()) }, true},
		{"changed after the read began: not stored", func(c *Cache[*owned], put func(Read)) {
			r := c.Begin()
			c.OwnerChanged(one)
			put(r)
		}, false},
		{"changed before the read began: stored", func(c *Cache[*owned], put func(Read)) {
			c.OwnerChanged(one)
			put(c.Begin())
		}, true},
		{"changed once stored: dropped", func(c *Cache[*owned], put func(Read)) {
			put(c.Begin())
			c.OwnerChanged(one)
		}, false},
		{"another owner changed: kept", func(c *Cache[*owned], put func(Read)) {
			put(c.Begin())
			c.OwnerChanged(two)
		}, true},
		{"every owner changed: dropped", func(c *Cache[*owned], put func(Read)) {
			put(c.Begin())
			c.AllChanged()
		}, false},
		{"every owner changed during the read: not stored", func(c *Cache[*owned], put func(Read)) {
			r := c.Begin()
			c.AllChanged()
			put(r)
		}, false},
		{"older than the TTL: dropped", func(c *Cache[*owned], put func(Read)) {
			put(Read{epoch: c.Begin().epoch, at: time.Now().Add(-time.Minute)})
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCache(time.Second)
			tt.run(c, func(r Read) { c.Put(r, "k1", &owned{owner: one, names: []string{"one"}}) })
			got, ok := c.Get("k1")
			require.Equal(t, tt.want, ok)
			if ok {
				require.Equal(t, one, got.owner)
			}
		})
	}
	t.Run("a TTL of zero caches nothing", func(t *testing.T) {
		c := newTestCache(0)
		c.Put(c.Begin(), "k1", &owned{owner: one})
		_, ok := c.Get("k1")
		require.False(t, ok)
		start := time.Now()
		c.WaitTTL(context.Background())
		require.Less(t, time.Since(start), 100*time.Millisecond, "nothing to wait out")
	})
	t.Run("callers get copies", func(t *testing.T) {
		c := newTestCache(time.Second)
		c.Put(c.Begin(), "k1", &owned{owner: one, names: []string{"one"}})
		got, _ := c.Get("k1")
		got.names[0] = "changed"
		again, _ := c.Get("k1")
		require.Equal(t, "one", again.names[0])
		shared, err := c.Share("k2", func() (*owned, error) { return again, nil })
		require.NoError(t, err)
		shared.names[0] = "changed"
		require.Equal(t, "one", again.names[0])
	})
}

func TestRowChanges(t *testing.T) {
	t.Parallel()
	owner := uuid.New()
	named := func() (uuid.UUID, bool) { return owner, true }
	tests := []struct {
		name   string
		change func() (uuid.UUID, bool)
		want   uuid.UUID
		wantOK bool
	}{
		{"a new owner changes nobody", func() (uuid.UUID, bool) { return OwnerRowChange(rowOp{op: ent.OpCreate}) }, uuid.Nil, false},
		{"one owner row changes its owner", func() (uuid.UUID, bool) { return OwnerRowChange(rowOp{op: ent.OpUpdateOne, id: owner}) }, owner, true},
		{"a deleted owner row changes its owner", func() (uuid.UUID, bool) { return OwnerRowChange(rowOp{op: ent.OpDeleteOne, id: owner}) }, owner, true},
		{"a bulk change of owners changes every owner", func() (uuid.UUID, bool) { return OwnerRowChange(rowOp{op: ent.OpUpdate}) }, uuid.Nil, true},
		{"a new held row changes its owner", func() (uuid.UUID, bool) { return HeldRowChange(ent.OpCreate, named) }, owner, true},
		{"a changed held row changes every owner", func() (uuid.UUID, bool) { return HeldRowChange(ent.OpUpdateOne, named) }, uuid.Nil, true},
	}
	for _, tt := range tests {
		got, ok := tt.change()
		require.Equal(t, tt.wantOK, ok, tt.name)
		require.Equal(t, tt.want, got, tt.name)
	}
}

// rowOp is a mutation of owner rows as OwnerRowChange sees it.
type rowOp struct {
	op ent.Op
	id uuid.UUID
}

func (r rowOp) Op() ent.Op            { return r.op }
func (r rowOp) ID() (uuid.UUID, bool) { return r.id, r.id != uuid.Nil }
