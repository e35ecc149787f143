package ratelimit

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"agentpay/internal/clock"
	"agentpay/internal/testdb"
)

// BenchmarkAllow measures one rate-limit check of a known subject: on
// PostgreSQL (TEST_DATABASE_URL set) served from the instance's leases, on
// SQLite the in-memory counters. The clock moves an hour every 200 checks,
// so nearly every check is allowed and updates existing rows, as in
// production.
//
//	go test -run '^$' -bench Allow -benchtime 3s ./internal/ratelimit/
func BenchmarkAllow(b *testing.B) {
	db := testdb.Open(b)
	var calls atomic.Int64
	lim := New(db, discardLogger, clock.Func(func() time.Time {
		return epoch.Add(time.Duration(calls.Add(1)/200) * time.Hour)
	}))
	l := NewLimit[uuid.UUID](lim, tiers, nil)
	ctx := context.Background()

	b.Run("serial", func(b *testing.B) {
		sub := tierSubject("T4")
		for b.Loop() {
			if _, err := l.Allow(ctx, sub); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Each goroutine is its own subject, as with many clients.
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			sub := tierSubject("T4")
			for pb.Next() {
				if _, err := l.Allow(ctx, sub); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	// A refused check (over the minute): decided from the lease.
	b.Run("refused", func(b *testing.B) {
		lim2, _ := newTestLimiter(b, db)
		l2 := NewLimit[uuid.UUID](lim2, tiers, nil)
		sub := tierSubject("T0")
		for b.Loop() {
			_, _ = l2.Allow(ctx, sub)
		}
	})
}

// BenchmarkCountStatement compares the counting statement prepared (one
// round trip: bind and execute) with the same statement unprepared (lib/pq
// parses then executes: two round trips).
func BenchmarkCountStatement(b *testing.B) {
	if !testdb.IsPostgres() {
		b.Skip("PostgreSQL only")
	}
	db := testdb.Open(b)
	ctx := context.Background()
	hits := func(i int) []any {
		start := int64(1_900_000_000 + (i/200)*3600)
		return []any{"bench:x:minute", start, start + 60, "bench:x:hour", start, start + 3600, 1 << 30}
	}
	q := countSQL(2)
	b.Run("prepared", func(b *testing.B) {
		st, err := db.SQL.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		var m, h int64
		i := 0
		for b.Loop() {
			i++
			if err := st.QueryRowContext(ctx, hits(i)...).Scan(&m, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unprepared", func(b *testing.B) {
		var m, h int64
		i := 0
		for b.Loop() {
			i++
			if err := db.SQL.QueryRowContext(ctx, q, hits(i)...).Scan(&m, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
