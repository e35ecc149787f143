package rest

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
	"agentpay/internal/vault"
)

// testAPI is one API instance over a real database. Several instances can
// share a database (pass the same DB) to test what must hold across them.
type testAPI struct {
	t      testing.TB
	Server *httptest.Server
	Svc    *agentpay.Service
	DB     *store.DB
	Env    *testenv.Env
}

// testAPIConfig customises newTestAPI; the zero value is a fresh bundle: a
// fresh database, a fresh vault and no chains.
type testAPIConfig struct {
	// Env is the bundle the service is built from (devnets, a River
	// client...); nil is a fresh one on DB and Vault.
	Env *testenv.Env
	// DB and Vault, when set, replace the bundle's: a second instance on
	// the same database, or sharing one MASTER_KEY.
	DB     *store.DB
	Vault  *vault.Vault
	Config agentpay.Config // other service settings (limits, agents' mode...)
}

// newTestAPI is the REST router over a service built from the bundle,
// behind a real HTTP server.
func newTestAPI(tb testing.TB, cfg testAPIConfig) *testAPI {
	tb.Helper()
	env := cfg.Env
	if env == nil {
		env = testenv.New(tb, testenv.Options{DB: cfg.DB, Vault: cfg.Vault})
	}
	scfg := cfg.Config
	if cfg.DB != nil {
		scfg.DB = cfg.DB
	}
	if cfg.Vault != nil {
		scfg.Vault = cfg.Vault
	}
	env.Fill(&scfg)
	svc, err := agentpay.NewService(scfg)
	require.NoError(tb, err)
	srv := httptest.NewServer(NewRouter(Config{Service: svc, Logger: scfg.Logger}))
	tb.Cleanup(srv.Close)
	return &testAPI{t: tb, Server: srv, Svc: svc, DB: scfg.DB, Env: env}
}
