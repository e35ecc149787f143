package agentpay

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStmtCachePreparesOnceAndStaysBounded(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t)
	c := newStmtCache(db.SQL)
	t.Cleanup(c.close)

	one := func(query string, want int) {
		t.Helper()
		rows, err := c.QueryContext(ctx, query)
		require.NoError(t, err)
		defer rows.Close()
		require.True(t, rows.Next())
		var got int
		require.NoError(t, rows.Scan(&got))
		require.Equal(t, want, got)
	}
	one("SELECT 1", 1)
	one("SELECT 1", 1)
	require.Len(t, c.stmts, 1, "the same text is prepared once")

	for i := range maxCachedStatements + 50 {
		one(fmt.Sprintf("SELECT %d", i+2), i+2)
	}
	require.Len(t, c.stmts, maxCachedStatements, "a full cache runs new queries unprepared")

	_, err := c.ExecContext(ctx, "SELECT nonsense FROM nowhere")
	require.Error(t, err, "a query that cannot be prepared still reports its own error")
}
