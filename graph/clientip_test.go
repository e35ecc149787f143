package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
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
	// The service's clock stands still: every request falls into one window.
	api := newAgentAPI(t, agentAPIConfig{IPRateLimit: 2, Clock: clock.NewStub(time.Now())})
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

// TestWebsocketConnectionsPerClientBehindProxy: behind a trusted proxy the
// websocket cap (ConnectionsPerIP) is per client X-Forwarded-For names, not
// one cap shared by every client of the proxy.
func TestWebsocketConnectionsPerClientBehindProxy(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	srv := newTestServer(t, env, agentpay.Config{ConnectionsPerIP: 1}, HandlerConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	dial := func(client string) (*websocket.Conn, int) {
		dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
		conn, resp, err := dialer.Dial(url, http.Header{"X-Forwarded-For": {client}})
		if err != nil {
			require.ErrorIs(t, err, websocket.ErrBadHandshake)
			return nil, resp.StatusCode
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn, resp.StatusCode
	}
	_, status := dial("198.51.100.1")
	require.Equal(t, http.StatusSwitchingProtocols, status)
	_, status = dial("198.51.100.1")
	require.Equal(t, http.StatusTooManyRequests, status, "the same client is over its cap")
	_, status = dial("198.51.100.2")
	require.Equal(t, http.StatusSwitchingProtocols, status, "another client behind the proxy has its own cap")
}
