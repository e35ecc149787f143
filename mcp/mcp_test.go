package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/payment"
	"agentpay/internal/httpx"
)

// wantTools are the tools /mcp lists.
var wantTools = []string{"get_balance", "get_limits", "list_pairings", "pay_checkout", "pay_checkout_x402", "request_card_purchase", "revoke_pairing", "send", "send_to_user"}

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

// TestMCPGoClient: the Go SDK's client lists the tools with their JSON
// schemas and pays a checkout with pay_checkout (the payment detected,
// recorded from its transaction); the other tools answer as REST does; a
// refusal is a tool error with REST's detail; a missing or wrong key is
// refused before MCP.
func TestMCPGoClient(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	_, key := m.agent(t, "mcp_go", 10_000_000)
	sess := m.session(t, "3.5")

	cs, err := connect(t, m.URL, key)
	require.NoError(t, err)
	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		require.NotNil(t, tool.InputSchema, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
	}
	slices.Sort(names)
	require.Equal(t, wantTools, names)
	pay := toolNamed(list.Tools, "pay_checkout")
	schema, _ := json.Marshal(pay.InputSchema)
	require.Contains(t, string(schema), `"external_id"`)
	require.Contains(t, string(schema), `"required":["external_id"]`)
	var send struct {
		Properties map[string]map[string]any
		Required   []string
	}
	remarshal(t, toolNamed(list.Tools, "send").InputSchema, &send)
	require.Equal(t, "number", send.Properties["amount_usd"]["type"], "an amount is an exact JSON number")
	require.Equal(t, []string{"to_username", "amount_usd"}, send.Required)

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pay_checkout", Arguments: map[string]any{"external_id": sess.ExternalID}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", textOf(res))
	var paid map[string]any
	remarshal(t, res.StructuredContent, &paid)
	require.Equal(t, "detected", paid["status"])
	require.Equal(t, "confirming", paid["session_status"])
	require.Equal(t, 3.5, paid["amount_usd"])
	require.Regexp(t, `^pay_`, paid["payment_id"])
	require.Equal(t, 1, m.Env.DB.Ent.Payment.Query().Where(payment.ExternalID(paid["payment_id"].(string))).CountX(ctx))

	// The same refusal text as REST's detail, as a tool error.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "pay_checkout", Arguments: map[string]any{"external_id": sess.ExternalID}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "conflict: session "+sess.ExternalID+" already has a payment (status confirming)", textOf(res))
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "send", Arguments: map[string]any{"to_username": "nobody_here", "amount_usd": 1}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, `not found: no agent named "nobody_here"`, textOf(res))

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_balance"})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", textOf(res))
	var bal map[string]any
	remarshal(t, res.StructuredContent, &bal)
	require.Equal(t, 6.5, bal["total_usd"])

	for _, name := range []string{"get_limits", "list_pairings"} {
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: name})
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %v", name, textOf(res))
	}

	// Card purchases answer as REST does: this service has no card issuer.
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "request_card_purchase",
		Arguments: map[string]any{"amount_usd": 5, "merchant_name": "Acme", "description": "a book"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	_, detail := httpx.ErrorStatus(agentpay.ErrCardsOff, false)
	require.Equal(t, detail, textOf(res))

	_, err = connect(t, m.URL, "ak_wrong")
	require.Error(t, err)
	resp, err := http.Post(m.URL, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	var body map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, "invalid or missing API key", body["detail"])
}

// TestMCPNodeClient: the official TypeScript SDK (testdata/mcpclient, npm
// @modelcontextprotocol/sdk 1.32.2) under node lists the tools and pays a
// checkout over streamable HTTP.
func TestMCPNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the MCP TypeScript SDK client cannot run (TestMCPGoClient covers the Go SDK's)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "mcpclient"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	m := newTestMCP(t)
	_, key := m.agent(t, "mcp_node", 10_000_000)
	sess := m.session(t, "1.25")

	cmd := exec.Command(node, "pay.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+m.URL, "AGENT_KEY="+key, "SESSION="+sess.ExternalID)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node pay.mjs: %s", stderr.String())
	var got struct {
		Tools   []string
		Schemas map[string]map[string]any
		Payment map[string]any
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	slices.Sort(got.Tools)
	require.Equal(t, wantTools, got.Tools)
	require.Equal(t, "object", got.Schemas["pay_checkout"]["type"])
	require.Equal(t, "detected", got.Payment["status"])
	require.Equal(t, sess.ExternalID, got.Payment["session_id"])
	require.Equal(t, 1.25, got.Payment["amount_usd"])
}

func toolNamed(tools []*sdk.Tool, name string) *sdk.Tool {
	for _, t := range tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, to))
}

// TestMCPRevokePairing: revoke_pairing ends the agent's pairing as REST's
// POST /agents/me/pairings/{id}/revoke does; another agent's pairing is a
// tool error with REST's detail.
func TestMCPRevokePairing(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	a, key := m.agent(t, "mcp_revoke", 0)
	other, _ := m.agent(t, "mcp_other", 0)
	u, err := m.Svc.CreateUser(ctx, agentpay.NewUser{Email: "mcp_human@example.com", Username: "mcp_human_" + uuid.NewString()[:6]})
	require.NoError(t, err)
	pv, err := m.Svc.RequestPairing(ctx, a, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = m.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	theirs, err := m.Svc.RequestPairing(ctx, other, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)

	cs, err := connect(t, m.URL, key)
	require.NoError(t, err)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "revoke_pairing", Arguments: map[string]any{"pairing_id": theirs.Pairing.ID.String()}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, `not found: no pairing with id "`+theirs.Pairing.ID.String()+`"`, textOf(res))
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "revoke_pairing", Arguments: map[string]any{"pairing_id": pv.Pairing.ID.String()}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", textOf(res))
	var got map[string]any
	remarshal(t, res.StructuredContent, &got)
	require.Equal(t, "revoked", got["status"])
	ps, err := m.Svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	require.Equal(t, agentpay.PairingRevoked, ps[0].Status)
}

// TestMCPAnswersAsREST: each tool's structured content is the JSON REST
// answers for the same capability, from the same internal/httpx types (the
// nested limits, the pairings with their null decided_at, the balance); a
// send a paired human's policy holds answers REST's 202 body, the approval,
// and its output schema offers both shapes.
func TestMCPAnswersAsREST(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	a, key := m.agent(t, "mcp_same", 5_000_000)
	payee, _ := m.agent(t, "mcp_payee", 0)
	u, err := m.Svc.CreateUser(ctx, agentpay.NewUser{Email: "mcp_same@example.com", Username: "mcp_same_" + uuid.NewString()[:6]})
	require.NoError(t, err)
	pv, err := m.Svc.RequestPairing(ctx, a, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = m.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	threshold := decimal.RequireFromString("0.5")
	_, err = m.Svc.SetSpendingPolicy(ctx, &agentpay.Viewer{User: u}, a.Username, agentpay.SpendingPolicyInput{ApprovalThreshold: &threshold})
	require.NoError(t, err)

	cs, err := connect(t, m.URL, key)
	require.NoError(t, err)
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %v", name, textOf(res))
		var got map[string]any
		remarshal(t, res.StructuredContent, &got)
		return got
	}
	asJSON := func(v any) map[string]any {
		t.Helper()
		var out map[string]any
		remarshal(t, v, &out)
		return out
	}

	limits, err := m.Svc.Limits(ctx, a)
	require.NoError(t, err)
	require.Equal(t, asJSON(httpx.LimitsOf(a, limits)), call("get_limits", nil))
	pairings, err := m.Svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	got := call("list_pairings", nil)
	require.Equal(t, asJSON(httpx.PairingsOf(a, pairings)), got)
	require.Contains(t, got["pairings"].([]any)[0], "decided_at")
	balance, err := m.Svc.Balance(ctx, a)
	require.NoError(t, err)
	require.Equal(t, asJSON(httpx.BalanceOf(balance)), call("get_balance", nil))

	held := call("send", map[string]any{"to_username": payee.Username, "amount_usd": 1})
	require.Equal(t, "awaiting_approval", held["status"])
	require.Equal(t, "send", held["operation"])
	v, err := m.Svc.AgentSpendApproval(ctx, a, held["approval_id"].(string))
	require.NoError(t, err)
	require.Equal(t, asJSON(httpx.ApprovalOf(v, held["message"].(string))), held)

	list, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var schema struct {
		AnyOf []struct {
			Required []string
		}
	}
	remarshal(t, toolNamed(list.Tools, "send").OutputSchema, &schema)
	require.Len(t, schema.AnyOf, 2, "send answers a transfer or the approval that holds it")
	require.Contains(t, schema.AnyOf[0].Required, "transaction_id")
	require.Contains(t, schema.AnyOf[1].Required, "approval_id")
}

// TestMCPToolsDocumented: the tool table of docs/agent-commerce.md ("MCP
// server") lists exactly the tools of the table in tools.go.
func TestMCPToolsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "agent-commerce.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## MCP server\n")
	require.True(t, ok, "agent-commerce.md has its MCP server section")
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	served := []string{payX402Tool}
	for _, tool := range tools {
		served = append(served, tool.name)
	}
	slices.Sort(documented)
	slices.Sort(served)
	require.Equal(t, served, documented)
}
