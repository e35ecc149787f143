package rest

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestTrustedProxiesSeparateClients: behind a trusted proxy each client
// (X-Forwarded-For) has its own per-IP budget; from an untrusted peer the
// header is ignored and every request counts against the peer.
func TestTrustedProxiesSeparateClients(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{IPRateLimit: 2}})
	behind := func(proxies []netip.Prefix) *testAPI {
		srv := httptest.NewServer(NewRouter(Config{Service: api.Svc, TrustedProxies: proxies}))
		t.Cleanup(srv.Close)
		a := *api
		a.Server = srv
		return &a
	}
	from := func(ip string) http.Header { return http.Header{"X-Forwarded-For": {"203.0.113.99, " + ip}} }

	proxied := behind([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	for range 2 {
		require.Equal(t, http.StatusOK, proxied.do(http.MethodGet, "/agents/stats", nil, from("198.51.100.1")).Status)
	}
	require.Equal(t, http.StatusTooManyRequests, proxied.do(http.MethodGet, "/agents/stats", nil, from("198.51.100.1")).Status)
	resp := proxied.do(http.MethodGet, "/agents/stats", nil, from("198.51.100.2"))
	require.Equal(t, http.StatusOK, resp.Status, "another client behind the proxy has its own budget")
	require.Equal(t, "1", resp.Header.Get("X-RateLimit-Remaining"))

	// The same headers from a peer that is not a trusted proxy name nobody:
	// the peer (loopback, with no request counted yet) is the client.
	direct := behind(nil)
	require.Equal(t, http.StatusOK, direct.do(http.MethodGet, "/agents/stats", nil, from("198.51.100.3")).Status)
	require.Equal(t, http.StatusOK, direct.do(http.MethodGet, "/agents/stats", nil, from("198.51.100.4")).Status)
	require.Equal(t, http.StatusTooManyRequests, direct.do(http.MethodGet, "/agents/stats", nil, from("198.51.100.5")).Status)
}
