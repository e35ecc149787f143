package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/graph"
	"agentpay/internal/clock"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
	"agentpay/rest"
	"agentpay/web"
)

// harness is the whole HTTP API (rest router with the pages mounted at
// /pay, as cmd/agentpay wires it) over a Service whose test mode runs on a
// base devnet and, optionally, a Solana devnet.
type harness struct {
	srv *httptest.Server
	// api is srv's handler, for tests that serve it behind their own.
	api http.Handler
	svc *agentpay.Service
	db  *store.DB
	evm *devnet.EVM
	// clock is the service's stub clock when the options set one.
	clock *clock.Stub

	logger *slog.Logger
}

// newHarness builds the service from the bundle: base blocks only on
// Commit, one confirmation; Solana (when asked) 32.
func newHarness(t *testing.T, withSolana bool) *harness {
	t.Helper()
	opts := testenv.Options{
		Chains:        []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 1, chains.Solana: 32},
	}
	if withSolana {
		opts.Chains = append(opts.Chains, chains.Solana)
	}
	return newHarnessWith(t, opts)
}

// newHarnessWith builds the harness on opts (its chains must include base).
func newHarnessWith(t *testing.T, opts testenv.Options) *harness {
	t.Helper()
	env := testenv.New(t, opts)
	var cfg agentpay.Config
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	// Wired as cmd/agentpay does: the pages at /pay, the status
	// subscription on /graphql.
	logger := env.Logger
	api := rest.NewRouter(rest.Config{
		Service: svc, Logger: logger,
		Pages:  web.NewHandler(web.Config{Service: svc, Logger: logger, GraphQLPath: "/graphql"}),
		Mounts: map[string]http.Handler{"/graphql": graph.NewHandler(graph.HandlerConfig{Service: svc, Logger: logger})},
	})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &harness{srv: srv, api: api, svc: svc, db: env.DB, evm: env.EVM(chains.Base), clock: env.Clock, logger: logger}
}
