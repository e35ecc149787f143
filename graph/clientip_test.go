package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// post sends a raw GraphQL POST body and returns the status with the
// answer (the helpers of the other tests insist on 200).
func post(t *testing.T, url string, header http.Header, body io.Reader) (int, gqlResult) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, body)
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out gqlResult
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	out.Header = resp.Header
	return resp.StatusCode, out
}

func operation(t *testing.T, q string, vars map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	return b
}

// TestGraphQLTrustedProxies: behind a trusted proxy each client named by
// X-Forwarded-For has its own per-IP budget; from any other peer the header
// is ignored.
func TestGraphQLTrustedProxies(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{IPRateLimit: 2})
	serve := func(proxies []netip.Prefix) string {
		srv := httptest.NewServer(NewHandler(HandlerConfig{Service: api.Svc, TrustedProxies: proxies}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	stats := func(url, client string) string {
		_, out := post(t, url, http.Header{"X-Forwarded-For": {"203.0.113.99, " + client}},
			bytes.NewReader(operation(t, `{ stats { agents } }`, nil)))
		if len(out.Errors) == 0 {
			return ""
		}
		code, _ := out.Errors[0].Extensions["code"].(string)
		return code
	}
	freshRateWindow(t)
	proxied := serve([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	require.Empty(t, stats(proxied, "198.51.100.1"))
	require.Empty(t, stats(proxied, "198.51.100.1"))
	require.Equal(t, "RATE_LIMITED", stats(proxied, "198.51.100.1"))
	require.Empty(t, stats(proxied, "198.51.100.2"), "another client behind the proxy has its own budget")

	direct := serve(nil)
	require.Empty(t, stats(direct, "198.51.100.3"))
	require.Empty(t, stats(direct, "198.51.100.4"))
	require.Equal(t, "RATE_LIMITED", stats(direct, "198.51.100.5"), "the header of an untrusted peer names nobody")
}
