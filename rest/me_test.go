package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/internal/testdb"
	"agentpay/internal/vault"
)

// mePaths are every /agents/me/* route; all need a valid X-Agent-Key.
var mePaths = []struct{ method, path string }{
	{http.MethodGet, "/agents/me/profile"},
	{http.MethodGet, "/agents/me/limits"},
	{http.MethodGet, "/agents/me/wallets"},
	{http.MethodGet, "/agents/me/wallet/balance"},
	{http.MethodPost, "/agents/me/wallet/send"},
	{http.MethodPost, "/agents/me/wallets/verify"},
	{http.MethodPost, "/agents/me/regenerate-api-key"},
}

func TestMeProfile(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("me_agent")
	resp := api.do(http.MethodGet, "/agents/me/profile", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "me_profile", resp.Body, reg.goldenExtra())
	require.NotContains(t, string(resp.Body), reg.APIKey)
	require.NotContains(t, string(resp.Body), "encrypted")
	m := resp.Map(t)
	require.Equal(t, "T0", m["tier"])
	require.Equal(t, float64(0), m["trust_score"])
	require.Equal(t, reg.InviteCode, m["invite_code"])
}

func TestMeLimits(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("limited")
	resp := api.do(http.MethodGet, "/agents/me/limits", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "me_limits", resp.Body, nil)
	m := resp.Map(t)
	require.Equal(t, map[string]any{"requests_per_minute": float64(10), "requests_per_hour": float64(100)}, m["rate_limits"])
	send := m["send_limits"].(map[string]any)
	require.Equal(t, float64(100), send["per_send_usd"])
	require.Equal(t, float64(500), send["daily_usd"])
	require.Equal(t, map[string]any{"tier": "T1", "min_score": float64(20), "points_needed": float64(20)}, m["next_tier"])
}

func TestMeWallets(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("walleter")
	resp := api.do(http.MethodGet, "/agents/me/wallets", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "me_wallets", resp.Body, reg.goldenExtra())
	var body walletsBody
	resp.JSON(t, &body)
	require.Equal(t, reg.Solana, body.WalletAddress)
	require.Equal(t, []string{reg.Solana, reg.Base}, []string{body.Wallets[0].Address, body.Wallets[1].Address})
	require.True(t, body.Wallets[0].Primary)
	require.False(t, body.Wallets[1].Primary)
}

// TestMeRequiresKey: a missing, malformed or revoked key is 401 on every
// /agents/me/* path, through the real middleware.
func TestMeRequiresKey(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("revoked")
	resp := api.do(http.MethodPost, "/agents/me/regenerate-api-key", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	fresh := api.register("fresh")

	keys := map[string]http.Header{
		"missing":             nil,
		"empty":               agentKey(""),
		"malformed":           agentKey("not-a-key"),
		"wrong prefix":        agentKey("sk_live_" + strings.TrimPrefix(fresh.APIKey, vault.PrefixAgentKey)),
		"truncated":           agentKey(fresh.APIKey[:len(fresh.APIKey)-2]),
		"unknown":             agentKey("ak_" + strings.Repeat("A", 43)),
		"revoked":             agentKey(reg.APIKey),
		"bearer, not X-Agent": {"Authorization": {"Bearer " + fresh.APIKey}},
	}
	for name, header := range keys {
		for _, p := range mePaths {
			t.Run(name+" "+p.method+" "+p.path, func(t *testing.T) {
				var body any
				if p.method == http.MethodPost {
					body = map[string]any{}
				}
				resp := api.do(p.method, p.path, body, header)
				require.Equal(t, http.StatusUnauthorized, resp.Status, string(resp.Body))
				require.Equal(t, map[string]any{"detail": "invalid or missing API key"}, resp.Map(t))
			})
		}
	}
}

// TestRegenerateAPIKeyAcrossInstances: the old key is refused at once by a
// second API instance sharing the database (its own pool, as another
// process), even one that has just authenticated the old key and holds it
// in its authentication cache.
func TestRegenerateAPIKeyAcrossInstances(t *testing.T) {
	one := newTestAPI(t, testAPIConfig{})
	two := newTestAPI(t, testAPIConfig{Env: one.Env, DB: testdb.Reopen(t, one.DB)}) // one MASTER_KEY

	reg := one.register("rotator")
	resp := two.do(http.MethodGet, "/agents/me/profile", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, "instance two knows the key: %s", resp.Body)

	resp = one.do(http.MethodPost, "/agents/me/regenerate-api-key", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "me_regenerate_api_key", resp.Body, nil)
	var body regenerateBody
	resp.JSON(t, &body)
	require.NotEqual(t, reg.APIKey, body.APIKey)

	for _, api := range []*testAPI{two, one} {
		resp = api.do(http.MethodGet, "/agents/me/profile", nil, agentKey(reg.APIKey))
		require.Equal(t, http.StatusUnauthorized, resp.Status, "the old key is refused everywhere at once")
		resp = api.do(http.MethodGet, "/agents/me/profile", nil, agentKey(body.APIKey))
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		require.NotNil(t, resp.Map(t)["api_key_rotated_at"])
	}
	// The old key cannot regenerate again either.
	resp = two.do(http.MethodPost, "/agents/me/regenerate-api-key", nil, agentKey(reg.APIKey))
	require.Equal(t, http.StatusUnauthorized, resp.Status)
}
