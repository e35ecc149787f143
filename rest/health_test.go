package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/chainstest"
	"agentpay/internal/testenv"
)

// TestReadinessProbesAreLimitedAndCostNoNodeCalls: /readyz is limited per
// client IP (PROBE_RATE_LIMIT a minute, this process's own count) and reads
// the chains from the head cache, so a flood of probes costs the nodes one
// head read per TTL and the database one ping per allowed probe.
func TestReadinessProbesAreLimitedAndCostNoNodeCalls(t *testing.T) {
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}})
	n := env.Test[chains.Base]
	heads := chainstest.CountHeads(n.Ledger)
	n.Ledger = heads
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{
		Test: chains.Networks{chains.Base: n}, ProbeRateLimit: 5, HeadCacheTTL: time.Minute,
	}})
	h := NewRouter(Config{Service: api.Svc, Logger: discardLogger()})

	probe := func(ip string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.RemoteAddr = ip + ":5000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 5 {
		rec := probe("198.51.100.7")
		require.Equal(t, http.StatusOK, rec.Code, "probe %d", i+1)
		require.Equal(t, "5", rec.Header().Get("X-RateLimit-Limit"))
	}
	rec := probe("198.51.100.7")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	var body map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Contains(t, body["detail"], "5 readiness probes per minute from this address")
	require.Equal(t, http.StatusOK, probe("198.51.100.8").Code, "another address has its own")
	require.Equal(t, int64(1), heads.Calls(), "seven probes, one head read")
}
