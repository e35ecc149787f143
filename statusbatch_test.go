package agentpay

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent/checkoutsession"
	"agentpay/internal/testdb/freshdb"
)

// TestStatusBatchesUseTheGenericPlan: the batched status statement is
// planned once on its connection, never per execution, while the other
// connections keep PostgreSQL's default; a connection the server ends is
// replaced without failing a request.
func TestStatusBatchesUseTheGenericPlan(t *testing.T) {
	if !freshdb.IsPostgres() {
		t.Skip("PostgreSQL only: set TEST_DATABASE_URL")
	}
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	reg := f.merchant(t, "Shop", nil)
	ids := make([]string, 40)
	for i := range ids {
		ids[i] = f.session(t, reg.Merchant, "10").ExternalID
	}
	// Concurrent polls, so that batches of several sizes run.
	poll := func() {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := i; j < len(ids); j += 8 {
					st, err := f.svc.CheckoutStatus(ctx, ids[j], "")
					if !(err == nil && st.Status == checkoutsession.StatusPending) {
						t.Errorf("status of %s: %v %v", ids[j], st, err)
					}
				}
			}()
		}
		wg.Wait()
	}
	for range 5 {
		poll()
	}

	b := statusBatchers.For(f.db)
	plans := func() (generic, custom int64) {
		t.Helper()
		b.connMu.Lock()
		defer b.connMu.Unlock()
		require.NotNil(t, b.conn, "the batches run on the batcher's connection")
		err := b.conn.QueryRowContext(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
			WHERE statement = $1`, checkoutStatusBatchQuery).Scan(&generic, &custom)
		require.NoError(t, err)
		return generic, custom
	}
	generic, custom := plans()
	require.Zero(t, custom, "planned again on an execution")
	require.Positive(t, generic)

	var mode string
	require.NoError(t, f.db.SQL.QueryRowContext(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode, "the pool's connections keep the default")

	// The server ends the batcher's session: the next polls still answer.
	var pid int
	b.connMu.Lock()
	err := b.conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid)
	b.connMu.Unlock()
	require.NoError(t, err)
	_, err = f.db.SQL.ExecContext(ctx, fmt.Sprintf("SELECT pg_terminate_backend(%d)", pid))
	require.NoError(t, err)
	poll()
	poll()
	generic, custom = plans()
	require.Zero(t, custom)
	require.Positive(t, generic)
}
