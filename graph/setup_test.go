package graph

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/testenv"
)

// testServer is one API process: a service built from the bundle and its
// GraphQL handler behind a real HTTP server.
type testServer struct {
	*httptest.Server
	Svc *agentpay.Service
}

// newTestServer builds a service from env (cfg's non-zero fields kept,
// testenv.Env.Fill) and serves it with a handler configured by hc (its
// Service and Logger are set here).
func newTestServer(tb testing.TB, env *testenv.Env, cfg agentpay.Config, hc HandlerConfig) *testServer {
	tb.Helper()
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(tb, err)
	hc.Service, hc.Logger = svc, cfg.Logger
	srv := httptest.NewServer(NewHandler(hc))
	tb.Cleanup(srv.Close)
	return &testServer{Server: srv, Svc: svc}
}
