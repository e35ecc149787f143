package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

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
	require.NoError(t, run(ctx, []string{"migrate"}, getenv, io.Discard))
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

// startServer serves h on a loopback port.
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
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
			addr := startServer(t, newHTTPHandler(cfg, svc, logger, tt.dev))

			resp, err := http.Get("http://" + addr + "/playground")
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, tt.playground, resp.StatusCode == http.StatusOK, "playground: %d", resp.StatusCode)

			resp, err = http.Post("http://"+addr+"/graphql", "application/json",
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
