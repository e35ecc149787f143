package mcp

// Fuzz target of the tools' arguments. Seeds are in testdata/fuzz/<target>;
// `make fuzz` runs it (docs/testing.md).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// FuzzMCPToolArguments calls each tool of the table (the fuzzed index
// picks it) with fuzzed arguments through the real MCP server (JSON-RPC
// tools/call over its HTTP handler, the agent's key as bearer) and the
// service on a real database. In the arguments, {session}, {user} and
// {agent} stand for a real checkout session's external id, a user's id
// and another agent's username, so the fuzzer reaches the service's rules
// as well as the decoding. Every answer is HTTP 200 with a JSON-RPC
// result or error; a malformed call is the protocol's invalid params or a
// tool error whose text is REST's detail; nothing is an internal error,
// the protocol's (-32603) or the service's ("internal error" as a tool's
// text). The service's clock moves an hour a call, so the agent's rate
// limit never stands in front of the tools.
func FuzzMCPToolArguments(f *testing.F) {
	env := testenv.New(f, testenv.Options{Jobs: true, Clock: time.Now()})
	cfg := agentpay.Config{AgentMode: agentpay.ModeTest}
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	if err != nil {
		f.Fatal(err)
	}
	h := NewHandler(Config{Service: svc, Logger: cfg.Logger})
	ctx := context.Background()
	payer, err := svc.QuickRegister(ctx, "fuzz_mcp")
	if err != nil {
		f.Fatal(err)
	}
	payee, err := svc.QuickRegister(ctx, "fuzz_payee")
	if err != nil {
		f.Fatal(err)
	}
	u, err := svc.CreateUser(ctx, agentpay.NewUser{Email: "fuzz-mcp@example.com", Username: "fuzz_person"})
	if err != nil {
		f.Fatal(err)
	}
	name, email := "Fuzz Shop", "fuzz-shop@example.com"
	shop, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	if err != nil {
		f.Fatal(err)
	}
	auth, err := svc.AuthenticateMerchant(ctx, shop.Keys.TestSecretKey)
	if err != nil {
		f.Fatal(err)
	}
	five := decimal.RequireFromString("5.00")
	sess, err := svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &five, Currency: "USD"})
	if err != nil {
		f.Fatal(err)
	}
	fill := strings.NewReplacer("{session}", sess.Session.ExternalID, "{user}", u.ID.String(), "{agent}", payee.Agent.Username)
	_, internal := httpx.ErrorStatus(errors.New("unexpected"), false)

	f.Fuzz(func(t *testing.T, tool uint8, arguments []byte) {
		env.Clock.Advance(time.Hour)
		args := json.RawMessage(fill.Replace(string(arguments)))
		if !json.Valid(args) {
			args, _ = json.Marshal(string(args)) // the protocol's own refusal: arguments are an object
		}
		name := tools[int(tool)%len(tools)].name
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": args}})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "http://api.test/mcp", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+payer.APIKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s %s: HTTP %d %s", name, args, rec.Code, rec.Body)
		}
		var res struct {
			Result *struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || (res.Result == nil) == (res.Error == nil) {
			t.Fatalf("%s %s: not a JSON-RPC answer: %s", name, args, rec.Body)
		}
		if res.Error != nil && res.Error.Code == -32603 {
			t.Fatalf("%s %s: internal error %s", name, args, res.Error.Message)
		}
		if res.Result != nil && res.Result.IsError {
			for _, c := range res.Result.Content {
				if c.Text == internal {
					t.Fatalf("%s %s: the service failed: %s", name, args, rec.Body)
				}
			}
		}
	})
}
