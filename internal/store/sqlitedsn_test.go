package store

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		in       string
		wantPath string
	}{
		{in: "/data/agentpay.db", wantPath: "file:/data/agentpay.db"},
		{in: "data/agentpay.db", wantPath: "file:data/agentpay.db"},
		{in: "file:/data/agentpay.db", wantPath: "file:/data/agentpay.db"},
		{in: "sqlite:///data/agentpay.db", wantPath: "file:/data/agentpay.db"},
		{in: "file::memory:?cache=shared", wantPath: "file::memory:"},
	} {
		dsn, err := sqliteDSN(tt.in)
		require.NoError(t, err, tt.in)
		path, query, ok := strings.Cut(dsn, "?")
		require.True(t, ok)
		require.Equal(t, tt.wantPath, path, tt.in)
		for _, p := range []string{"foreign_keys%281%29", "journal_mode%28WAL%29", "busy_timeout%285000%29", "synchronous%28NORMAL%29", "_txlock=immediate"} {
			require.Contains(t, query, p, tt.in)
		}
	}

	// A pragma the caller sets is kept, not duplicated.
	dsn, err := sqliteDSN("file:x.db?_pragma=journal_mode(MEMORY)")
	require.NoError(t, err)
	require.Contains(t, dsn, "journal_mode%28MEMORY%29")
	require.NotContains(t, dsn, "journal_mode%28WAL%29")
}
