package agentpay

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateSQL = flag.Bool("update", false, "rewrite the pinned statements under testdata/ratelimit")

// TestRateLimitStatements pins every statement the rate limiter sends to
// PostgreSQL (testdata/ratelimit/*.sql), so that a change to one shows in
// review: they run on every authenticated request. The files break the
// statement before each CTE and the final SELECT; whitespace is otherwise
// not compared. `go test -run TestRateLimitStatements -update` rewrites them.
func TestRateLimitStatements(t *testing.T) {
	t.Parallel()
	agents := agentRateScheme.Statements(&agentKeySource)
	requests := ipRateScheme(RateRequest, Config{IPRateLimit: 600}).Statements(nil)
	registrations := ipRateScheme(RateRegistration, Config{RegisterRateLimit: 20}).Statements(nil)
	statements := map[string]string{
		"agent_reserve_by_key":    agents.ReserveByCredential,
		"agent_reserve":           agents.Reserve,
		"ip_reserve":              requests.Reserve,
		"ip_registration_reserve": registrations.Reserve,
		"count_1_window":          requests.Count,
		"count_2_windows":         agents.Count,
		"cleanup":                 agents.Cleanup,
	}
	for name, q := range statements {
		got := layoutSQL(q)
		path := filepath.Join("testdata", "ratelimit", name+".sql")
		if *updateSQL {
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "no pinned statement: run go test -run TestRateLimitStatements -update")
		require.Equal(t, string(want), got, name)
	}
}

var (
	sqlSpace   = regexp.MustCompile(`\s+`)
	sqlCTE     = regexp.MustCompile(`\),\s*(\w+ AS \()`)
	sqlAsyncOf = regexp.MustCompile(`(\w+ AS \(SELECT set_config\('synchronous_commit', 'off', true\)\)) `)
)

// layoutSQL puts each CTE of a statement, and its final SELECT, on a line
// of its own.
func layoutSQL(q string) string {
	q = strings.TrimSpace(sqlSpace.ReplaceAllString(q, " "))
	q = sqlCTE.ReplaceAllString(q, "),\n$1")
	q = sqlAsyncOf.ReplaceAllString(q, "$1\n")
	return q + "\n"
}
