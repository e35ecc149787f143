package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/cardissuer/sandbox"
	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/ent/spendapproval"
	"agentpay/ent/transfer"
	"agentpay/ent/user"
)

// rpc posts one 2026-07-28 JSON-RPC request (the version and, with tasks,
// the Tasks extension in its _meta) and answers its result or error.
func rpc(t *testing.T, url, key, method string, params map[string]any, tasks bool) (result, rpcErr map[string]any) {
	t.Helper()
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{TasksExtension: map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{metaProtocolVersion: ProtocolVersion, metaClientCapabilities: caps,
		"io.modelcontextprotocol/clientInfo": map[string]string{"name": "agentpay-test", "version": "1"}}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	var msg struct {
		Result map[string]any
		Error  map[string]any
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	return msg.Result, msg.Error
}

// heldAgent is an agent with 10 USDC paired with a human whose spending
// policy holds any send above 1 USD, and a payee agent.
func (m *testMCP) heldAgent(t *testing.T) (a *ent.Agent, key string, human *agentpay.Viewer, payee string) {
	t.Helper()
	ctx := context.Background()
	a, key = m.agent(t, "held", 10_000_000)
	p, _ := m.agent(t, "payee", 0)
	name := "hum_" + uuid.NewString()[:8]
	u, err := m.Svc.CreateUser(ctx, agentpay.NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	pv, err := m.Svc.RequestPairing(ctx, a, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = m.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	human = &agentpay.Viewer{User: u}
	one := decimal.RequireFromString("1")
	_, err = m.Svc.SetSpendingPolicy(ctx, human, a.Username, agentpay.SpendingPolicyInput{ApprovalThreshold: &one})
	require.NoError(t, err)
	return a, key, human, p.Username
}

// heldSend calls send for 1.5 USD, held by the policy: a task, working.
func heldSend(t *testing.T, url, key, payee string) string {
	t.Helper()
	res, e := rpc(t, url, key, "tools/call", map[string]any{"name": "send",
		"arguments": map[string]any{"to_username": payee, "amount_usd": 1.5, "chain": "base"}}, true)
	require.Nil(t, e)
	require.Equal(t, "task", res["resultType"], "%v", res)
	require.Equal(t, "working", res["status"])
	require.Contains(t, res["statusMessage"], "awaiting approval by ")
	require.EqualValues(t, time.Hour.Milliseconds(), res["ttlMs"])
	require.NotEmpty(t, res["pollIntervalMs"])
	id, _ := res["taskId"].(string)
	require.NotEmpty(t, id)
	return id
}

// TestMCPDiscoverAndVersions: server/discover names both versions and the
// Tasks extension; an unknown version is UnsupportedProtocolVersionError
// naming the supported ones; tools/list and a plain tool call answer
// resultType complete; a request without the version in _meta still goes
// to the SDK (2025-11-25, TestMCPGoClient and TestMCPNodeClient).
func TestMCPDiscoverAndVersions(t *testing.T) {
	m := newTestMCP(t)
	_, key := m.agent(t, "disc", 2_000_000)
	res, e := rpc(t, m.URL, key, "server/discover", nil, false)
	require.Nil(t, e)
	require.Subset(t, res["supportedVersions"], []any{ProtocolVersion, "2025-11-25"})
	require.Contains(t, res["capabilities"].(map[string]any)["extensions"], TasksExtension)
	require.Equal(t, "agentpay", res["_meta"].(map[string]any)[metaServerInfo].(map[string]any)["name"])

	res, e = rpc(t, m.URL, key, "tools/list", nil, false)
	require.Nil(t, e)
	require.Equal(t, "complete", res["resultType"])
	require.Len(t, res["tools"], len(wantTools))

	res, e = rpc(t, m.URL, key, "tools/call", map[string]any{"name": "get_balance"}, false)
	require.Nil(t, e)
	require.Equal(t, 2.0, res["structuredContent"].(map[string]any)["total_usd"])
	res, e = rpc(t, m.URL, key, "tools/call", map[string]any{"name": "send", "arguments": map[string]any{"to_username": "nobody_here", "amount_usd": 1}}, false)
	require.Nil(t, e)
	require.Equal(t, true, res["isError"])
	res, e = rpc(t, m.URL, key, "tools/call", map[string]any{"name": "send", "arguments": map[string]any{"bogus": 1}}, false)
	require.Nil(t, e)
	require.Equal(t, true, res["isError"], "unknown arguments are refused")

	_, e = rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": "not-a-task"}, true)
	require.Contains(t, e["message"], "not found")

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`
	req, _ := http.NewRequest(http.MethodPost, m.URL, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2099-01-01")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var msg struct{ Error map[string]any }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	require.EqualValues(t, codeUnsupportedProtocolVersion, msg.Error["code"], "%v", msg.Error)
	require.Subset(t, msg.Error["data"].(map[string]any)["supported"], []any{ProtocolVersion, "2025-11-25"})
}

// TestMCPHeldSendTask: a send a human's policy holds answers a task; it
// stays working through a cancel (a client giving up is not a denial) and
// a restart of the service; when the human approves, tasks/get answers it
// completed with the transfer. Another agent cannot read it; a client
// without the Tasks extension gets the approval as before.
func TestMCPHeldSendTask(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	a, key, human, payee := m.heldAgent(t)
	id := heldSend(t, m.URL, key, payee)

	res, e := rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": id}, true)
	require.Nil(t, e)
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, "working", res["status"])

	res, e = rpc(t, m.URL, key, "tasks/cancel", map[string]any{"taskId": id}, true)
	require.Nil(t, e, "%v", e)
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, spendapproval.StatusAwaitingApproval, m.Env.DB.Ent.SpendApproval.GetX(ctx, uuid.MustParse(id)).Status,
		"a cancel (the client stops waiting) is never recorded as a denial")

	_, otherKey := m.agent(t, "other", 0)
	_, e = rpc(t, m.URL, otherKey, "tasks/get", map[string]any{"taskId": id}, true)
	require.NotNil(t, e, "another agent's task")
	require.Contains(t, e["message"], "not found")

	res, e = rpc(t, m.URL, key, "tools/call", map[string]any{"name": "send",
		"arguments": map[string]any{"to_username": payee, "amount_usd": 1.25, "chain": "base"}}, false)
	require.Nil(t, e)
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, "awaiting_approval", res["structuredContent"].(map[string]any)["status"], "no Tasks extension: the approval as a result")

	m2 := m.restart(t)
	res, e = rpc(t, m2.URL, key, "tasks/get", map[string]any{"taskId": id}, true)
	require.Nil(t, e)
	require.Equal(t, "working", res["status"], "after a restart")

	_, err := m2.Svc.ApproveSpendApproval(ctx, human, id, "", nil)
	require.NoError(t, err)
	res, e = rpc(t, m2.URL, key, "tasks/get", map[string]any{"taskId": id}, true)
	require.Nil(t, e)
	require.Equal(t, "completed", res["status"], "%v", res)
	out := res["result"].(map[string]any)["structuredContent"].(map[string]any)
	require.Equal(t, "approved", out["status"])
	tid, _ := out["transaction_id"].(string)
	require.NotEmpty(t, tid)
	tr := m.Env.DB.Ent.Transfer.Query().Where(transfer.ID(uuid.MustParse(tid))).OnlyX(ctx)
	require.Equal(t, a.ID, *tr.FromAgentID)
}

// TestMCPHeldSendDeniedOrExpired: a denial ends the task failed with its
// reason; so does the expiry, as soon as it passes (before the sweeper
// moves the approval) and after.
func TestMCPHeldSendDeniedOrExpired(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t)
	_, key, human, payee := m.heldAgent(t)

	denied := heldSend(t, m.URL, key, payee)
	_, err := m.Svc.DenySpendApproval(ctx, human, denied)
	require.NoError(t, err)
	res, e := rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": denied}, true)
	require.Nil(t, e)
	require.Equal(t, "failed", res["status"])
	require.Contains(t, res["error"].(map[string]any)["message"], "denied: a paired human denied this send")
	require.EqualValues(t, codeOperationRefused, res["error"].(map[string]any)["code"])

	expired := heldSend(t, m.URL, key, payee)
	m.Env.DB.Ent.SpendApproval.UpdateOneID(uuid.MustParse(expired)).SetExpiresAt(time.Now().Add(-time.Second)).ExecX(ctx)
	for range 2 {
		res, e = rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": expired}, true)
		require.Nil(t, e)
		require.Equal(t, "failed", res["status"])
		require.Contains(t, res["error"].(map[string]any)["message"], "expired: no human decided before")
		n, err := m.Svc.ExpireSpendApprovals(ctx)
		require.NoError(t, err)
		_ = n
	}
	require.Equal(t, spendapproval.StatusExpired, m.Env.DB.Ent.SpendApproval.GetX(ctx, uuid.MustParse(expired)).Status)
}

// TestMCPNodeClient2026: the official TypeScript client 2.x
// (testdata/mcpclient2, npm @modelcontextprotocol/client 2.4.0) under node
// negotiates 2026-07-28 by server/discover, lists the tools and calls one.
func TestMCPNodeClient2026(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the MCP TypeScript client cannot run (TestMCPDiscoverAndVersions covers the protocol)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "mcpclient2"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "client")); err != nil {
		t.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	m := newTestMCP(t)
	_, key := m.agent(t, "mcp_node2", 3_000_000)
	cmd := exec.Command(node, "call.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+m.URL, "AGENT_KEY="+key, "TOOL=get_balance", "ARGS={}")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node call.mjs: %s", stderr.String())
	var got struct {
		Version  string
		Discover map[string]any
		Tools    []string
		Result   map[string]any
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Equal(t, ProtocolVersion, got.Version, "the client negotiated 2026-07-28")
	require.Contains(t, got.Discover["supportedVersions"], ProtocolVersion)
	slices.Sort(got.Tools)
	require.Equal(t, wantTools, got.Tools)
	require.Equal(t, 3.0, got.Result["structuredContent"].(map[string]any)["total_usd"], string(out))
}

// TestMCPCardPurchaseTask: request_card_purchase from a client with the
// Tasks extension answers a task that works while the human decides
// (a cancel is no denial, and never spends the card's one reveal), then
// completes with the card, its details in the first tasks/get only; a
// denial and an expiry end it failed with why. Without the extension the
// call answers the request, as before.
func TestMCPCardPurchaseTask(t *testing.T) {
	ctx := context.Background()
	m := newTestMCP(t, func(c *agentpay.Config) { c.CardIssuer = sandbox.New() })
	a, key := m.agent(t, "card", 30_000_000)
	name := "cardhum_" + uuid.NewString()[:8]
	u, err := m.Svc.CreateUser(ctx, agentpay.NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	pv, err := m.Svc.RequestPairing(ctx, a, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = m.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	u = m.Env.DB.Ent.User.UpdateOne(u).SetIdentityStatus(user.IdentityStatusVerified).SaveX(ctx)
	human := &agentpay.Viewer{User: u}
	request := func(merchant string) string {
		t.Helper()
		res, e := rpc(t, m.URL, key, "tools/call", map[string]any{"name": "request_card_purchase",
			"arguments": map[string]any{"amount_usd": 12.5, "merchant_name": merchant, "description": "a book"}}, true)
		require.Nil(t, e, "%v", e)
		require.Equal(t, "task", res["resultType"], "%v", res)
		require.Equal(t, "working", res["status"])
		require.Equal(t, "awaiting approval by "+name+": a card of up to 12.50 USD at "+merchant, res["statusMessage"])
		id, _ := res["taskId"].(string)
		require.NotEmpty(t, id)
		return id
	}

	id := request("Acme Books")
	res, e := rpc(t, m.URL, key, "tasks/cancel", map[string]any{"taskId": id}, true)
	require.Nil(t, e, "%v", e)
	require.Equal(t, "complete", res["resultType"])
	require.Equal(t, cardrequest.StatusPendingApproval, m.Env.DB.Ent.CardRequest.GetX(ctx, uuid.MustParse(id)).Status,
		"a cancel (the client stops waiting) is never recorded as a denial")
	_, otherKey := m.agent(t, "other", 0)
	_, e = rpc(t, m.URL, otherKey, "tasks/get", map[string]any{"taskId": id}, true)
	require.NotNil(t, e, "another agent's task")
	require.Contains(t, e["message"], "not found")

	res, e = rpc(t, m.URL, key, "tools/call", map[string]any{"name": "request_card_purchase",
		"arguments": map[string]any{"amount_usd": 1, "merchant_name": "Plain", "description": "a pen"}}, false)
	require.Nil(t, e)
	require.Equal(t, "complete", res["resultType"])
	require.NotNil(t, res["structuredContent"], "%v", res)
	require.Equal(t, "pending_approval", res["structuredContent"].(map[string]any)["status"], "no Tasks extension: the request as a result")

	_, err = m.Svc.ApproveCardRequest(ctx, human, id, "", nil)
	require.NoError(t, err)
	require.NotNil(t, m.Env.DB.Ent.CardRequest.GetX(ctx, uuid.MustParse(id)).CardToken, "the card is issued on approval")
	_, e = rpc(t, m.URL, key, "tasks/cancel", map[string]any{"taskId": id}, true)
	require.Nil(t, e)
	res, e = rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": id}, true)
	require.Nil(t, e)
	require.Equal(t, "completed", res["status"], "%v", res)
	card := res["result"].(map[string]any)["structuredContent"].(map[string]any)["card"].(map[string]any)
	details, _ := card["details"].(map[string]any)
	require.NotEmpty(t, details["number"], "the first completed read reveals the card, even after a cancel")
	res, e = rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": id}, true)
	require.Nil(t, e)
	require.Equal(t, "completed", res["status"])
	require.Nil(t, res["result"].(map[string]any)["structuredContent"].(map[string]any)["card"].(map[string]any)["details"], "shown once")

	denied := request("Denied Books")
	_, err = m.Svc.DenyCardRequest(ctx, human, denied)
	require.NoError(t, err)
	res, e = rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": denied}, true)
	require.Nil(t, e)
	require.Equal(t, "failed", res["status"])
	require.Contains(t, res["error"].(map[string]any)["message"], "denied: a paired human denied this card purchase")

	expired := request("Late Books")
	m.Env.DB.Ent.CardRequest.UpdateOneID(uuid.MustParse(expired)).SetExpiresAt(time.Now().Add(-time.Second)).ExecX(ctx)
	res, e = rpc(t, m.URL, key, "tasks/get", map[string]any{"taskId": expired}, true)
	require.Nil(t, e)
	require.Equal(t, "failed", res["status"])
	require.Contains(t, res["error"].(map[string]any)["message"], "expired: no human decided before")
}
