package authcache

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/clock"
)

// owned is a cached value: an owner and what was read of it.
type owned struct {
	owner uuid.UUID
	names []string
}

func newTestCache(ttl time.Duration, clk clock.Clock) *Cache[*owned] {
	return New(ttl, clk, func(v *owned) uuid.UUID { return v.owner }, func(v *owned) *owned {
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
		// run acts on a cache holding nothing (its clock clk, its TTL a
		// second), with a value of owner `one` read by put under "k1"; the
		// case says whether "k1" is then served.
		run  func(c *Cache[*owned], clk *clock.Stub, put func(Read))
		want bool
	}{
		{"read, stored, served", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) { put(c.Begin()) }, true},
		{"changed after the read began: not stored", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) {
			r := c.Begin()
			c.OwnerChanged(one)
			put(r)
		}, false},
		{"changed before the read began: stored", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) {
			c.OwnerChanged(one)
			put(c.Begin())
		}, true},
		{"changed once stored: dropped", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) {
			put(c.Begin())
			c.OwnerChanged(one)
		}, false},
		{"another owner changed: kept", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) {
			put(c.Begin())
			c.OwnerChanged(two)
		}, true},
		{"every owner changed: dropped", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) {
			put(c.Begin())
			c.AllChanged()
		}, false},
		{"every owner changed during the read: not stored", func(c *Cache[*owned], _ *clock.Stub, put func(Read)) {
			r := c.Begin()
			c.AllChanged()
			put(r)
		}, false},
		{"younger than the TTL: served", func(c *Cache[*owned], clk *clock.Stub, put func(Read)) {
			put(c.Begin())
			clk.Advance(time.Second - time.Nanosecond)
		}, true},
		{"as old as the TTL by the clock: dropped", func(c *Cache[*owned], clk *clock.Stub, put func(Read)) {
			put(c.Begin())
			clk.Advance(time.Second)
		}, false},
		{"read a TTL ago: dropped", func(c *Cache[*owned], clk *clock.Stub, put func(Read)) {
			r := c.Begin()
			clk.Advance(time.Minute)
			put(r)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewStub(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			c := newTestCache(time.Second, clk)
			tt.run(c, clk, func(r Read) { c.Put(r, "k1", &owned{owner: one, names: []string{"one"}}) })
			got, ok := c.Get("k1")
			require.Equal(t, tt.want, ok)
			if ok {
				require.Equal(t, one, got.owner)
			}
		})
	}
	t.Run("a TTL of zero caches nothing", func(t *testing.T) {
		c := newTestCache(0, clock.System)
		c.Put(c.Begin(), "k1", &owned{owner: one})
		_, ok := c.Get("k1")
		require.False(t, ok)
		c.WaitTTL(context.Background()) // nothing to wait out: returns
	})
	t.Run("callers get copies", func(t *testing.T) {
		c := newTestCache(time.Second, clock.NewStub(time.Now()))
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
