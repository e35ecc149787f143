package facadetest

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/ent/webhookevent"
	"agentpay/graph"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
	"agentpay/mcp"
	"agentpay/rest"
)

// onePayment is the answer of one facade to a keyed checkout payment:
// the transfer and payment it names, whether it was marked replayed
// (MCP does not say), or the refusal.
type onePayment struct {
	transferID, paymentID string
	replayed              bool
	// refusal: the REST status, the GraphQL code or the MCP tool error's
	// text; "" when paid.
	refusal string
}

// facades pays a session over REST, GraphQL and MCP as one agent, each
// with an Idempotency-Key (REST's header, GraphQL's idempotencyKey, MCP's
// idempotency_key), all on one service, wired as cmd/agentpay wires them.
type facades struct {
	t   *testing.T
	url string // REST, with GraphQL at /graphql
	key string
	mcp *sdk.ClientSession
}

func (f *facades) rest(externalID, key string) onePayment {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+"/checkout/pay/"+externalID+"/agent-pay", strings.NewReader(`{"chain":"base"}`))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpx.AgentKeyHeader, f.key)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(f.t, json.NewDecoder(resp.Body).Decode(&body))
	if resp.StatusCode != http.StatusOK {
		return onePayment{refusal: http.StatusText(resp.StatusCode)}
	}
	return onePayment{transferID: body["transaction_id"].(string), paymentID: body["payment_id"].(string),
		replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
}

func (f *facades) graphql(externalID, key string) onePayment {
	f.t.Helper()
	q := `mutation($in: PayCheckoutInput!) { payCheckout(input: $in) { transactionId paymentId replayed } }`
	raw, err := json.Marshal(map[string]any{"query": q, "variables": map[string]any{
		"in": map[string]any{"externalId": externalID, "chain": "base", "idempotencyKey": key}}})
	require.NoError(f.t, err)
	req, err := http.NewRequest(http.MethodPost, f.url+"/graphql", bytes.NewReader(raw))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpx.AgentKeyHeader, f.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	var out struct {
		Data struct {
			PayCheckout *struct {
				TransactionID string
				PaymentID     *string
				Replayed      bool
			}
		}
		Errors []struct {
			Extensions struct{ Code string }
		}
	}
	require.NoError(f.t, json.NewDecoder(resp.Body).Decode(&out))
	if len(out.Errors) > 0 {
		return onePayment{refusal: out.Errors[0].Extensions.Code}
	}
	p := out.Data.PayCheckout
	require.NotNil(f.t, p)
	require.NotNil(f.t, p.PaymentID)
	return onePayment{transferID: p.TransactionID, paymentID: *p.PaymentID, replayed: p.Replayed}
}

func (f *facades) mcpTool(externalID, key string) onePayment {
	f.t.Helper()
	res, err := f.mcp.CallTool(context.Background(), &sdk.CallToolParams{Name: "pay_checkout",
		Arguments: map[string]any{"external_id": externalID, "chain": "base", "idempotency_key": key}})
	require.NoError(f.t, err)
	if res.IsError {
		return onePayment{refusal: textOf(res)}
	}
	var body map[string]any
	remarshal(f.t, res.StructuredContent, &body)
	return onePayment{transferID: body["transaction_id"].(string), paymentID: body["payment_id"].(string)}
}

// TestOneKeyAcrossFacades: an agent's key is one key whichever facade
// carries it (docs/agent-commerce.md, exactly once): paid over REST, the
// same key retried over GraphQL and over MCP answers the same payment;
// paid over MCP, retried over GraphQL and REST, the same. Each session
// ends with one payment, one transfer (recorded and on chain) and one
// payment.detected webhook event; the same key for another session is
// refused by every facade as REST refuses it (422,
// IDEMPOTENCY_KEY_REUSED, the same text as a tool error), paying nothing.
func TestOneKeyAcrossFacades(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	api := rest.NewRouter(rest.Config{Service: m.Svc, Logger: m.cfg.Logger,
		Mounts: map[string]http.Handler{"/graphql": graph.NewHandler(graph.HandlerConfig{Service: m.Svc, Logger: m.cfg.Logger})}})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name  string
		order []string
	}{
		{"REST then GraphQL then MCP", []string{"rest", "graphql", "mcp"}},
		{"MCP then GraphQL then REST", []string{"mcp", "graphql", "rest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An agent each: its tier takes 10 requests a minute.
			a, key := m.agent(t, "one_key", 10_000_000)
			cs, err := connect(t, m.URL, key)
			require.NoError(t, err)
			f := &facades{t: t, url: srv.URL, key: key, mcp: cs}
			by := map[string]func(externalID, key string) onePayment{"rest": f.rest, "graphql": f.graphql, "mcp": f.mcpTool}
			sess := m.session(t, "3.5")
			idemKey := "order-" + sess.ExternalID
			first := by[tc.order[0]](sess.ExternalID, idemKey)
			require.Empty(t, first.refusal)
			require.False(t, first.replayed)
			for _, retry := range tc.order[1:] {
				got := by[retry](sess.ExternalID, idemKey)
				require.Empty(t, got.refusal)
				require.Equal(t, first.transferID, got.transferID, "the same transfer")
				require.Equal(t, first.paymentID, got.paymentID, "the same payment")
			}
			// REST and GraphQL say it was a replay when they answer second
			// or third.
			again := by[tc.order[1]](sess.ExternalID, idemKey)
			require.True(t, again.replayed, "%+v", again)

			// Another session under the key: refused by each, as REST refuses.
			other := m.session(t, "3.5")
			require.Equal(t, "Unprocessable Entity", f.rest(other.ExternalID, idemKey).refusal)
			require.Equal(t, "IDEMPOTENCY_KEY_REUSED", f.graphql(other.ExternalID, idemKey).refusal)
			require.Contains(t, f.mcpTool(other.ExternalID, idemKey).refusal, "Idempotency-Key was already used for a different request")
			require.Zero(t, m.Env.DB.Ent.Payment.Query().Where(payment.HasSessionWith(checkoutsession.ID(other.ID))).CountX(ctx))

			require.Equal(t, 1, m.Env.DB.Ent.Payment.Query().Where(payment.HasSessionWith(checkoutsession.ID(sess.ID))).CountX(ctx), "one payment")
			require.Equal(t, 1, m.Env.DB.Ent.Transfer.Query().Where(transfer.CheckoutSessionID(sess.ID)).CountX(ctx), "one transfer recorded")
			require.Equal(t, 1, m.Env.DB.Ent.WebhookEvent.Query().Where(webhookevent.SessionID(sess.ID), webhookevent.EventType(agentpay.EventPaymentDetected)).CountX(ctx), "one payment.detected")
			require.Len(t, usdcTransfersFrom(t, m, baseWallet(t, m, a)), 1, "one token transfer on chain")
			bal, err := m.Svc.Balance(ctx, a)
			require.NoError(t, err)
			require.Equal(t, "6.5", bal.TotalUSD.String(), "paid once")
		})
	}
}

func baseWallet(t *testing.T, m *testMCP, a *ent.Agent) string {
	t.Helper()
	ws, err := m.Env.DB.Ent.Wallet.Query().Where(wallet.AgentID(a.ID)).All(context.Background())
	require.NoError(t, err)
	for _, w := range ws {
		if w.Chain == string(chains.Base) {
			return w.Address
		}
	}
	t.Fatal("the agent has no base wallet")
	return ""
}

// usdcTransfersFrom are the devnet USDC's Transfer logs from address.
func usdcTransfersFrom(t *testing.T, m *testMCP, address string) []any {
	t.Helper()
	evm := m.Env.EVM(chains.Base)
	logs, err := evm.Client().FilterLogs(t.Context(), ethereum.FilterQuery{
		FromBlock: big.NewInt(0), Addresses: []common.Address{evm.USDC},
		Topics: [][]common.Hash{
			{crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))},
			{common.BytesToHash(common.LeftPadBytes(common.HexToAddress(address).Bytes(), 32))},
		},
	})
	require.NoError(t, err)
	out := make([]any, len(logs))
	for i := range logs {
		out[i] = logs[i].TxHash
	}
	return out
}

// testMCP is one service with /mcp on a real HTTP server, agents whose
// wallets and test-mode checkout share a base devnet (a block every 50
// ms, 2 confirmations).
type testMCP struct {
	URL string
	Svc *agentpay.Service
	Env *testenv.Env
	cfg agentpay.Config
}

func newTestMCP(t *testing.T) *testMCP {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	cfg := agentpay.Config{AgentMode: agentpay.ModeTest}
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(mcp.NewHandler(mcp.Config{Service: svc, Logger: cfg.Logger}))
	t.Cleanup(srv.Close)
	return &testMCP{URL: srv.URL, Svc: svc, Env: env, cfg: cfg}
}

// agent registers an agent holding usdc on base: the agent and its key.
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

// bearerTransport adds the agent key to every request of the client.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connect is the Go SDK's client over streamable HTTP with the key.
func connect(t *testing.T, url, key string) (*sdk.ClientSession, error) {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "agentpay-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{key: key}}, DisableStandaloneSSE: true,
	}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// textOf is a tool result's text content.
func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// remarshal decodes from's JSON into to.
func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, to))
}
