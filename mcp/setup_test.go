package mcp

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/internal/testenv"
)

// testMCP is /mcp over a service whose agents' wallets and test-mode
// checkout share a base devnet (a block every 50 ms, 2 confirmations), on
// a real HTTP server.
type testMCP struct {
	URL string
	Svc *agentpay.Service
	Env *testenv.Env
	cfg agentpay.Config
}

func newTestMCP(t *testing.T, configure ...func(*agentpay.Config)) *testMCP {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	cfg := agentpay.Config{AgentMode: agentpay.ModeTest}
	for _, c := range configure {
		c(&cfg)
	}
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(NewHandler(Config{Service: svc, Logger: cfg.Logger}))
	t.Cleanup(srv.Close)
	return &testMCP{URL: srv.URL, Svc: svc, Env: env, cfg: cfg}
}

// restart is a new service and server over the same database, as a
// restarted process (nothing kept in memory carries over).
func (m *testMCP) restart(t *testing.T) *testMCP {
	t.Helper()
	svc, err := agentpay.NewService(m.cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(NewHandler(Config{Service: svc, Logger: m.cfg.Logger}))
	t.Cleanup(srv.Close)
	return &testMCP{URL: srv.URL, Svc: svc, Env: m.Env, cfg: m.cfg}
}

// agent registers an agent holding usdc on base; it answers the agent and
// its API key.
func (m *testMCP) agent(t *testing.T, name string, usdc int64) (*ent.Agent, string) {
	t.Helper()
	reg, err := m.Svc.QuickRegister(context.Background(), name+"_"+uuid.NewString()[:8])
	require.NoError(t, err)
	for _, w := range reg.Wallets {
		if w.Chain == string(chains.Base) && usdc > 0 {
			m.Env.Fund(t, chains.Base, w.Address, usdc)
		}
	}
	return reg.Agent, reg.APIKey
}

// session is a test-mode session of a fresh merchant.
func (m *testMCP) session(t *testing.T, amount string) *ent.CheckoutSession {
	t.Helper()
	ctx := context.Background()
	name, email := "Shop", "shop@example.com"
	reg, err := m.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	return m.Env.DB.Ent.CheckoutSession.Create().
		SetMerchantID(reg.Merchant.ID).SetExternalID("cs_test_" + uuid.NewString()[:24]).SetLivemode(false).
		SetAmountUsd(decimal.RequireFromString(amount)).SetCurrency("USD").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).SaveX(ctx)
}
