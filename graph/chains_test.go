package graph

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/chainstest"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// newChainsServer serves GraphQL over a base devnet whose ledger counts its
// head reads, the service's head cache and per-IP connections configured;
// the service's clock stands still until the test moves it.
func newChainsServer(t *testing.T, headTTL time.Duration, connectionsPerIP int) (*testServer, *chainstest.HeadCounter, *clock.Stub) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 20 * time.Millisecond, Clock: time.Now()})
	n := env.Test[chains.Base]
	heads := chainstest.CountHeads(n.Ledger)
	n.Ledger = heads
	srv := newTestServer(t, env, agentpay.Config{
		Test: chains.Networks{chains.Base: n}, HeadCacheTTL: headTTL, ConnectionsPerIP: connectionsPerIP,
	}, HandlerConfig{HeadPollInterval: 5 * time.Millisecond})
	return srv, heads, env.Clock
}

// subscribeChainHead opens a websocket and subscribes to base's head.
func subscribeChainHead(t *testing.T, srv *testServer) *websocket.Conn {
	t.Helper()
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, _, err := dialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{}}))
	var msg struct{ Type string }
	require.NoError(t, conn.ReadJSON(&msg))
	require.Equal(t, "connection_ack", msg.Type)
	require.NoError(t, conn.WriteJSON(map[string]any{
		"id": "1", "type": "subscribe",
		"payload": map[string]any{"query": `subscription { chainHead(name: "base") { head healthy } }`},
	}))
	return conn
}

// TestChainHeadsCostOneReadPerTTL: the public chains query and chainHead
// subscriptions (each looking every 5 ms here) read heads from the
// service's cache, so however many clients ask, the node gets one head read
// per HeadCacheTTL of the service's clock.
func TestChainHeadsCostOneReadPerTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	srv, heads, clk := newChainsServer(t, ttl, 0)
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := query(t, srv.URL, `{ chains { head healthy } }`, nil)
			require.Empty(t, out.Errors)
			require.Contains(t, string(out.Data), `"healthy":true`)
		}()
	}
	for range 10 {
		conn := subscribeChainHead(t, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var msg struct{ Type string }
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			require.NoError(t, conn.ReadJSON(&msg))
			require.Equal(t, "next", msg.Type)
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), heads.Calls(), "forty clients within a TTL, one read")

	// The subscriptions keep looking: a TTL later, one read for them all.
	clk.Advance(ttl)
	require.Eventually(t, func() bool { return heads.Calls() == 2 }, 10*time.Second, time.Millisecond)
	out := query(t, srv.URL, `{ chains { head healthy } }`, nil)
	require.Empty(t, out.Errors)
	require.Equal(t, int64(2), heads.Calls(), "fresh again: no read")
}

// TestWebsocketConnectionsPerClientIP: a client IP holds at most
// ConnectionsPerIP websockets open on a process; one more is refused with
// 429 {"detail"} before the upgrade, and a closed one frees its place.
func TestWebsocketConnectionsPerClientIP(t *testing.T) {
	srv, _, _ := newChainsServer(t, time.Second, 2)
	first := subscribeChainHead(t, srv)
	subscribeChainHead(t, srv)

	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	_, resp, err := dialer.Dial(url, nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Contains(t, body["detail"], "rate limit exceeded: 2 open connections from this address")

	// Plain queries are not connections.
	require.Empty(t, query(t, srv.URL, `{ chains { healthy } }`, nil).Errors)

	require.NoError(t, first.Close())
	require.Eventually(t, func() bool {
		conn, _, err := dialer.Dial(url, nil)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}, 10*time.Second, 20*time.Millisecond, "a closed connection frees its place")
}
