package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent/checkoutsession"
)

// TestConcurrentCreatesShareCommits: creates that arrive together are
// written by shared multi-row inserts, and each create still gets its own
// row (its own amount, description and key) or its own error: a reused
// idempotency key in a batch fails only its create.
func TestConcurrentCreatesShareCommits(t *testing.T) {
	for _, maxOpen := range []int{0, 1000} { // no cap; the cap's headroom path
		t.Run(fmt.Sprintf("max-open-%d", maxOpen), func(t *testing.T) {
			svc := newTestService(t, nil, Config{MaxOpenSessions: maxOpen})
			ctx := context.Background()
			live, _ := merchantAuths(t, svc)
			// A first create counts the open sessions, so that the cap's
			// headroom is known when the others race, as in steady state.
			_, err := svc.CreateSession(ctx, live, SessionInput{Amount: decp("1"), Currency: "USD"})
			require.NoError(t, err)
			const n = 48
			shared := "shared-key"
			type answer struct {
				id, description, key string
				amount               string
				err                  error
			}
			answers := make([]answer, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					key := fmt.Sprintf("key-%d", i)
					if i%16 == 3 { // three creates share one key
						key = shared
					}
					desc := fmt.Sprintf("order %d", i)
					in := SessionInput{Amount: decp(fmt.Sprintf("%d.25", i+1)), Currency: "USD", Description: desc, IdempotencyKey: &key}
					c, err := svc.CreateSession(ctx, live, in)
					answers[i] = answer{err: err, description: desc, key: key, amount: fmt.Sprintf("%d.25", i+1)}
					if err == nil {
						answers[i].id = c.Session.ExternalID
						require.Equal(t, desc, c.Session.Description)
						require.Equal(t, key, *c.Session.IdempotencyKey)
						require.Equal(t, answers[i].amount, c.Session.AmountUsd.StringFixed(2))
					}
				}()
			}
			calls0, batches0 := svc.sessionInserts.Counts()
			// Without the cap every create inserts through the shared
			// inserts: the table is held so that the first insert waits,
			// the others gather behind it, and one more statement writes
			// them all once it is let go (SQLite: its one connection held
			// by a transaction; PostgreSQL: a lock that inserts wait for).
			var hold *sql.Tx
			if maxOpen == 0 {
				var err error
				hold, err = svc.cfg.DB.SQL.BeginTx(ctx, nil)
				require.NoError(t, err)
				if svc.cfg.DB.IsPostgres() {
					_, err = hold.ExecContext(ctx, "LOCK TABLE checkout_sessions IN SHARE ROW EXCLUSIVE MODE")
					require.NoError(t, err)
				}
			}
			close(start)
			if hold != nil {
				require.Eventually(t, func() bool {
					calls, _ := svc.sessionInserts.Counts()
					return calls-calls0 == n
				}, 30*time.Second, 5*time.Millisecond, "every create waits for the shared inserts")
				require.NoError(t, hold.Rollback())
			}
			wg.Wait()
			calls, batches := svc.sessionInserts.Counts()
			calls, batches = calls-calls0, batches-batches0
			if hold != nil {
				require.EqualValues(t, n, calls)
				require.EqualValues(t, 2, batches, "the first insert, then one for every create that waited behind it")
			} else {
				// With the cap, a create finding the headroom granted so
				// far taken counts the open sessions in a transaction of
				// its own; the others share.
				require.Positive(t, calls)
			}

			conflicts := 0
			for i, a := range answers {
				if a.err != nil {
					require.True(t, errors.Is(a.err, ErrConflict), "create %d: %v", i, a.err)
					require.Equal(t, shared, a.key, "only a reused key is refused")
					conflicts++
					continue
				}
				row, err := svc.cfg.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(a.id)).Only(ctx)
				require.NoError(t, err)
				require.Equal(t, a.description, row.Description, "create %d's answer is its own row", i)
				require.Equal(t, a.amount, row.AmountUsd.StringFixed(2))
			}
			require.Equal(t, 2, conflicts, "of three creates under one key, one is created")
			count, err := svc.cfg.DB.Ent.CheckoutSession.Query().Count(ctx)
			require.NoError(t, err)
			require.Equal(t, n-2+1, count)
		})
	}
}
