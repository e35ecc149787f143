package rest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/agent"
	"agentpay/internal/clock"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/vault"
)

// rateClock is a service clock (Config.Clock) standing still, for a test
// that counts requests against a window: the limiter reads it, so every
// request the test makes falls into one window however long they take (the
// service tests cover windows turning over, by moving it).
func rateClock() *clock.Stub { return clock.NewStub(time.Now()) }

// insertRateAgent stores an agent of tier directly and returns its API key.
func insertRateAgent(t *testing.T, db *store.DB, tier agent.Tier) string {
	t.Helper()
	key, hash, err := vault.NewSecret(vault.PrefixAgentKey)
	require.NoError(t, err)
	invite, _, err := vault.NewSecret(vault.PrefixAgentKey)
	require.NoError(t, err)
	// The score matches the tier (30: a verified partner is T1), so a trust
	// refresh by any endpoint keeps the tier.
	score := map[agent.Tier]int{agent.TierT0: 0, agent.TierT1: 30}[tier]
	db.Ent.Agent.Create().
		SetUsername("rate_" + invite[len(invite)-10:]).
		SetAPIKeyHash(hash).
		SetInviteCode(invite[3:15]).
		SetTier(tier).
		SetTrustScore(score).
		SetPartnerVerified(score > 0).
		SaveX(context.Background())
	return key
}

// requireRateHeaders checks the X-RateLimit-* headers of an answer of a
// per-minute limit, the service's clock reading now.
func requireRateHeaders(t *testing.T, res apiResponse, limit, remaining int, now time.Time) {
	t.Helper()
	require.Equal(t, strconv.Itoa(limit), res.Header.Get("X-RateLimit-Limit"))
	require.Equal(t, strconv.Itoa(remaining), res.Header.Get("X-RateLimit-Remaining"))
	// The window ends on the minute after now.
	require.Equal(t, strconv.FormatInt(now.Truncate(time.Minute).Add(time.Minute).Unix(), 10), res.Header.Get("X-RateLimit-Reset"))
}

// requireRefused checks a 429 answer: {detail}, Retry-After and the headers.
func requireRefused(t *testing.T, res apiResponse, limit int, now time.Time) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, res.Status, string(res.Body))
	require.Contains(t, res.Map(t)["detail"], "rate limit exceeded")
	requireRateHeaders(t, res, limit, 0, now)
	retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, retry, 1)
	require.LessOrEqual(t, retry, 60)
}

func TestAgentRateLimitByTier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tier      agent.Tier
		perMinute int
		requests  int
		refused   bool
	}{
		{agent.TierT0, 10, 11, true},
		{agent.TierT1, 30, 15, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.tier), func(t *testing.T) {
			t.Parallel()
			clk := rateClock()
			api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{Clock: clk}})
			key := insertRateAgent(t, api.DB, tt.tier)
			for i := 1; i <= tt.requests; i++ {
				res := api.do(http.MethodGet, "/agents/me/wallets", nil, agentKey(key))
				if tt.refused && i > tt.perMinute {
					requireRefused(t, res, tt.perMinute, clk.Now())
					continue
				}
				require.NotEqual(t, http.StatusTooManyRequests, res.Status, "request %d: %s", i, res.Body)
				requireRateHeaders(t, res, tt.perMinute, tt.perMinute-i, clk.Now())
				require.Empty(t, res.Header.Get("Retry-After"))
			}
		})
	}
}

func TestAgentRateLimitNeedsAKey(t *testing.T) {
	t.Parallel()
	api := newTestAPI(t, testAPIConfig{})
	// A refused key is 401 and counts nothing (there is no agent to count).
	res := api.do(http.MethodGet, "/agents/me/wallets", nil, agentKey("ak_nope"))
	require.Equal(t, http.StatusUnauthorized, res.Status)
	require.Empty(t, res.Header.Get("X-RateLimit-Limit"))
}

// Two API instances on one PostgreSQL database share an agent's counters:
// 6 requests to one and 4 to the other use up T0's 10, the 11th is refused by
// either.
func TestAgentRateLimitSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	if !testdb.IsPostgres() {
		t.Skip("instances share counters through PostgreSQL; on SQLite the API is one process")
	}
	clk := rateClock() // the instances' clocks agree
	api1 := newTestAPI(t, testAPIConfig{Config: agentpay.Config{Clock: clk}})
	api2 := newTestAPI(t, testAPIConfig{DB: api1.DB, Config: agentpay.Config{Clock: clk}})
	key := insertRateAgent(t, api1.DB, agent.TierT0)
	for i := 1; i <= 10; i++ {
		api := api1
		if i > 6 {
			api = api2
		}
		res := api.do(http.MethodGet, "/agents/me/wallets", nil, agentKey(key))
		require.NotEqual(t, http.StatusTooManyRequests, res.Status, "request %d", i)
		requireRateHeaders(t, res, 10, 10-i, clk.Now())
	}
	requireRefused(t, api2.do(http.MethodGet, "/agents/me/wallets", nil, agentKey(key)), 10, clk.Now())
	requireRefused(t, api1.do(http.MethodGet, "/agents/me/wallets", nil, agentKey(key)), 10, clk.Now())
}

func TestIPRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		ipLimit       int
		registerLimit int
		method, path  string
		body          any
		allowed       int // requests before a 429; -1: never refused
		limit         int // X-RateLimit-Limit shown
	}{
		{"requests per minute", 3, 0, http.MethodGet, "/agents/stats", nil, 3, 3},
		{"registrations per hour", 0, 2, http.MethodPost, "/agents/quick-register", map[string]any{"username": "x"}, 2, 2},
		// The registration figures are the tighter, shown last.
		{"registration under both", 100, 2, http.MethodPost, "/agents/quick-register", map[string]any{"username": "x"}, 2, 2},
		{"requests under both", 3, 100, http.MethodPost, "/agents/quick-register", map[string]any{"username": "x"}, 3, 3},
		{"both off", 0, 0, http.MethodPost, "/agents/quick-register", map[string]any{"username": "x"}, -1, 0},
		{"request limit off", 0, 2, http.MethodGet, "/agents/leaderboard", nil, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{
				IPRateLimit: tt.ipLimit, RegisterRateLimit: tt.registerLimit, Clock: rateClock(),
			}})
			n := tt.allowed + 1
			if tt.allowed < 0 {
				n = 25
			}
			for i := 1; i <= n; i++ {
				res := api.do(tt.method, tt.path, tt.body, nil)
				if i > tt.allowed && tt.allowed >= 0 {
					require.Equal(t, http.StatusTooManyRequests, res.Status)
					require.Contains(t, res.Map(t)["detail"], "rate limit exceeded")
					require.Equal(t, strconv.Itoa(tt.limit), res.Header.Get("X-RateLimit-Limit"))
					require.Equal(t, "0", res.Header.Get("X-RateLimit-Remaining"))
					retry, err := strconv.Atoi(res.Header.Get("Retry-After"))
					require.NoError(t, err)
					require.GreaterOrEqual(t, retry, 1)
					continue
				}
				require.NotEqual(t, http.StatusTooManyRequests, res.Status, "request %d: %s", i, res.Body)
				if tt.limit == 0 {
					require.Empty(t, res.Header.Get("X-RateLimit-Limit"))
				} else {
					require.Equal(t, strconv.Itoa(tt.limit), res.Header.Get("X-RateLimit-Limit"))
				}
			}
		})
	}
}
