package agentpay

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"agentpay/ent/agent"
	"agentpay/internal/testdb"
	"agentpay/internal/testdb/freshdb"
)

// BenchmarkAllowAgent measures one agent rate-limit check: on PostgreSQL
// (TEST_DATABASE_URL set) one statement counting both windows, on SQLite the
// in-memory counters. The clock moves an hour every 200 checks, so nearly
// every check is allowed and updates existing rows, as in production.
//
//	go test -run '^$' -bench AllowAgent -benchtime 3s .
func BenchmarkAllowAgent(b *testing.B) {
	db := testdb.Open(b)
	svc, _ := newRateService(b, db, 0, 0)
	var calls atomic.Int64
	svc.setRateClock(func() time.Time {
		return rateEpoch.Add(time.Duration(calls.Add(1)/200) * time.Hour)
	})
	ctx := context.Background()

	b.Run("serial", func(b *testing.B) {
		a := rateAgent(agent.TierT4)
		for b.Loop() {
			if _, err := svc.AllowAgent(ctx, a); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Each goroutine is its own agent, as with many clients.
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			a := rateAgent(agent.TierT4)
			for pb.Next() {
				if _, err := svc.AllowAgent(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	// A refused check (over the minute): one statement still, the hour's
	// upsert skipped.
	b.Run("refused", func(b *testing.B) {
		svc2, _ := newRateService(b, db, 0, 0)
		a := rateAgent(agent.TierT0)
		for b.Loop() {
			_, _ = svc2.AllowAgent(ctx, a)
		}
	})
}

// BenchmarkPgRateStatement compares the counting statement prepared (one
// round trip: bind and execute) with the same statement unprepared (lib/pq
// parses then executes: two round trips).
func BenchmarkPgRateStatement(b *testing.B) {
	if !freshdb.IsPostgres() {
		b.Skip("PostgreSQL only")
	}
	db := testdb.Open(b)
	ctx := context.Background()
	hits := func(i int) []any {
		start := int64(1_900_000_000 + (i/200)*3600)
		return []any{"bench:x:minute", start, start + 60, "bench:x:hour", start, start + 3600, 1 << 30}
	}
	q := pgRateSQL(2)
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
