package graph

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/internal/testenv"
)

// newChainServer is a server whose test mode has a base devnet (a block
// every 50 ms), its head subscriptions polling every 20 ms.
func newChainServer(t *testing.T) (*testServer, *devnet.EVM) {
	t.Helper()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	return newTestServer(t, env, agentpay.Config{}, HandlerConfig{HeadPollInterval: 20 * time.Millisecond}), env.EVM(chains.Base)
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func query(t *testing.T, url, q string, vars map[string]any) gqlResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out gqlResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestChainsQuery(t *testing.T) {
	srv, chain := newChainServer(t)
	out := query(t, srv.URL, `{ chains { name mode token head healthy } }`, nil)
	require.Empty(t, out.Errors)
	var data struct {
		Chains []struct {
			Name, Mode, Token string
			Head              *uint64
			Healthy           bool
		}
	}
	require.NoError(t, json.Unmarshal(out.Data, &data))
	require.Len(t, data.Chains, 1)
	c := data.Chains[0]
	require.Equal(t, "base", c.Name)
	require.Equal(t, "TEST", c.Mode)
	require.Equal(t, chain.USDC.Hex(), c.Token)
	require.True(t, c.Healthy)
	require.NotNil(t, c.Head)
	require.Positive(t, *c.Head)
}

func TestGraphQLErrorsCarryCodes(t *testing.T) {
	srv, _ := newChainServer(t)
	out := query(t, srv.URL, `{ node(id: "7f0c1a52-3b7e-4bd1-9b35-3f1e6a5f2a10") { id } }`, nil)
	require.Len(t, out.Errors, 1)
	require.Equal(t, "NOT_FOUND", out.Errors[0].Extensions["code"])

	out = query(t, srv.URL, `{ chains { nope } }`, nil)
	require.NotEmpty(t, out.Errors, "a query that does not validate is refused")
}

// TestChainHeadSubscription speaks graphql-transport-ws over a real
// websocket: each message carries a newer head than the one before.
func TestChainHeadSubscription(t *testing.T) {
	srv, _ := newChainServer(t)
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http")

	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, resp, err := dialer.Dial(wsURL, nil)
	require.NoError(t, err)
	defer conn.Close()
	require.Equal(t, "graphql-transport-ws", resp.Header.Get("Sec-Websocket-Protocol"))

	require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{}}))
	var msg struct {
		Type    string          `json:"type"`
		ID      string          `json:"id"`
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, conn.ReadJSON(&msg))
	require.Equal(t, "connection_ack", msg.Type)

	require.NoError(t, conn.WriteJSON(map[string]any{
		"id": "1", "type": "subscribe",
		"payload": map[string]any{"query": `subscription { chainHead(name: "base") { name head healthy } }`},
	}))
	var last uint64
	for i := 0; i < 3; i++ {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		require.NoError(t, conn.ReadJSON(&msg))
		require.Equal(t, "next", msg.Type, string(msg.Payload))
		var p struct {
			Data struct {
				ChainHead struct {
					Name    string
					Head    uint64
					Healthy bool
				}
			}
		}
		require.NoError(t, json.Unmarshal(msg.Payload, &p))
		require.Equal(t, "base", p.Data.ChainHead.Name)
		require.True(t, p.Data.ChainHead.Healthy)
		require.Greater(t, p.Data.ChainHead.Head, last)
		last = p.Data.ChainHead.Head
	}
	require.NoError(t, conn.WriteJSON(map[string]any{"id": "1", "type": "complete"}))
}

func TestSubscriptionOriginCheck(t *testing.T) {
	srv, _ := newChainServer(t)
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http")
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}

	_, resp, err := dialer.Dial(wsURL, http.Header{"Origin": {"https://evil.example"}})
	require.Error(t, err, "a browser on another site may not subscribe")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	conn, _, err := dialer.Dial(wsURL, http.Header{"Origin": {srv.URL}})
	require.NoError(t, err, "the API's own pages may")
	_ = conn.Close()
}
