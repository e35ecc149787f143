package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/vault"
)

// newTestService migrates a fresh SQLite database and builds a service on
// it, with the configuration env gives.
func newTestService(t *testing.T, env map[string]string) (config, *agentpay.Service) {
	t.Helper()
	ctx := context.Background()
	env["DATA_DIR"] = filepath.Join(t.TempDir(), "data")
	env["LOG_LEVEL"] = "error"
	getenv := func(k string) string { return env[k] }
	require.NoError(t, run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard))
	cfg, err := loadConfig(getenv)
	require.NoError(t, err)
	key, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	p, err := openPlatform(ctx, cfg, key)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.db.Close() })
	svc, err := p.service(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
	require.NoError(t, err)
	return cfg, svc
}

// startServer serves h with newHTTPServer on a loopback port.
func startServer(t *testing.T, h http.Handler, timeouts httpTimeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newHTTPServer(h, timeouts)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestHTTPServerBounds: the API's server bounds headers and slow requests,
// while a websocket outlives the read and write timeouts it clears.
func TestHTTPServerBounds(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		srv := newHTTPServer(http.NotFoundHandler(), defaultHTTPTimeouts)
		require.Equal(t, 10*time.Second, srv.ReadHeaderTimeout)
		require.Equal(t, 30*time.Second, srv.ReadTimeout)
		require.Equal(t, 2*time.Minute, srv.WriteTimeout)
		require.Equal(t, 2*time.Minute, srv.IdleTimeout)
		require.Equal(t, 64<<10, srv.MaxHeaderBytes)
	})

	cfg, svc := newTestService(t, map[string]string{})
	short := httpTimeouts{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
	addr := startServer(t, newHTTPHandler(cfg, svc, slog.New(slog.NewTextHandler(io.Discard, nil)), false, nil, nil), short)

	t.Run("headers over 64 KiB", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
		require.NoError(t, err)
		req.Header.Set("X-Padding", strings.Repeat("x", 100<<10))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	})

	t.Run("a body that never comes", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "POST /agents/quick-register HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
		require.NoError(t, err)
		// The server gives up on the body and closes the connection; the
		// deadline here only keeps a broken server from hanging the test.
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.ReadAll(conn)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closed the connection, not the test's deadline: %v", err)
	})

	t.Run("a websocket outlives the timeouts", func(t *testing.T) {
		dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
		conn, _, err := dialer.Dial("ws://"+addr+"/graphql", nil)
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init"}))
		var m struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		require.NoError(t, conn.ReadJSON(&m))
		require.Equal(t, "connection_ack", m.Type)
		time.Sleep(3 * short.Read) // past the read and write deadlines of the upgrade request
		require.NoError(t, conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": "{ __typename }"}}))
		require.NoError(t, conn.ReadJSON(&m))
		require.Equal(t, "next", m.Type, string(m.Payload))
		require.JSONEq(t, `{"data":{"__typename":"Query"}}`, string(m.Payload))
	})
}

// TestGraphQLSurfaceByCommand: introspection and the playground are on in
// dev, off in serve, and either way as GRAPHQL_INTROSPECTION and
// GRAPHQL_PLAYGROUND say.
func TestGraphQLSurfaceByCommand(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name                      string
		env                       map[string]string
		dev                       bool
		introspection, playground bool
	}{
		{"serve", map[string]string{}, false, false, false},
		{"dev", map[string]string{}, true, true, true},
		{"serve, configured on", map[string]string{"GRAPHQL_INTROSPECTION": "true", "GRAPHQL_PLAYGROUND": "1"}, false, true, true},
		{"dev, configured off", map[string]string{"GRAPHQL_INTROSPECTION": "false", "GRAPHQL_PLAYGROUND": "false"}, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, svc := newTestService(t, tt.env)
			addr := startServer(t, newHTTPHandler(cfg, svc, logger, tt.dev, nil, nil), defaultHTTPTimeouts)

			// The page and its files, which the binary serves itself.
			for _, path := range []string{"/playground", "/playground/assets/playground.js", "/playground/assets/vendor/graphiql.min.js"} {
				resp, err := http.Get("http://" + addr + path)
				require.NoError(t, err)
				_ = resp.Body.Close()
				require.Equal(t, tt.playground, resp.StatusCode == http.StatusOK, "%s: %d", path, resp.StatusCode)
			}

			resp, err := http.Post("http://"+addr+"/graphql", "application/json",
				bytes.NewReader([]byte(`{"query":"{ __schema { queryType { name } } }"}`)))
			require.NoError(t, err)
			body, err := io.ReadAll(bufio.NewReader(resp.Body))
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, tt.introspection, resp.StatusCode == http.StatusOK && !strings.Contains(string(body), `"errors"`),
				"introspection: %d %s", resp.StatusCode, body)
		})
	}
}
