package rest

// Fuzz targets of the REST facade's decoders. Seeds are in
// testdata/fuzz/<target>; `make fuzz` runs each target (docs/testing.md).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// fuzzRoute is one endpoint that reads outside input: a body, a query or a
// path parameter. {p} in path is the fuzzed parameter, or the fixture's id
// of the kind named by param when the input leaves it empty.
type fuzzRoute struct {
	method, path string
	param        string // "session", "cancel", "agent", "event" or ""
	auth         string // "agent", "merchant", "public" (the page's optional key) or ""
}

// fuzzRoutes are every route that reads a body, a query or a path
// parameter. An agent's key regeneration (no input, and it would lock the
// fixture out) is left out; a merchant key roll that succeeds hands the
// fixture its new keys.
var fuzzRoutes = []fuzzRoute{
	{http.MethodPost, "/agents/quick-register", "", ""},
	{http.MethodPost, "/agents/register", "", ""},
	{http.MethodGet, "/agents/signature-message", "", ""},
	{http.MethodGet, "/agents/leaderboard", "", ""},
	{http.MethodGet, "/agents/check-username/{p}", "", ""},
	{http.MethodGet, "/agents/by-username/{p}", "", ""},
	{http.MethodGet, "/agents/{p}", "agent", ""},
	{http.MethodPost, "/agents/me/wallet/send", "", "agent"},
	{http.MethodPost, "/agents/me/wallets/verify", "", "agent"},
	{http.MethodPost, "/checkout/merchants/register", "", ""},
	{http.MethodPatch, "/checkout/merchants/me", "", "merchant"},
	{http.MethodPost, "/checkout/sessions", "", "merchant"},
	{http.MethodGet, "/checkout/sessions", "", "merchant"},
	{http.MethodGet, "/checkout/sessions/{p}", "session", "merchant"},
	{http.MethodPost, "/checkout/sessions/{p}/cancel", "cancel", "merchant"},
	{http.MethodGet, "/checkout/webhooks/events", "", "merchant"},
	{http.MethodGet, "/checkout/webhooks/events/{p}", "event", "merchant"},
	{http.MethodPost, "/checkout/webhooks/events/{p}/redeliver", "event", "merchant"},
	{http.MethodGet, "/checkout/pay/{p}/", "session", "public"},
	{http.MethodPost, "/checkout/pay/{p}/select", "session", "public"},
	{http.MethodGet, "/checkout/pay/{p}/status", "session", "public"},
	{http.MethodPost, "/dev/faucet", "", ""},
	{http.MethodPost, "/checkout/merchants/me/webhook-secret/roll", "", "merchant"},
	{http.MethodPost, "/checkout/merchants/me/keys/roll", "", "merchant"},
}

// FuzzRESTRequests sends fuzzed bodies, queries, path parameters and
// Idempotency-Key headers to every endpoint that reads them, through the
// real router and service on a real database, with the fixture's valid key
// (or a fuzzed one). Bad input must be answered with its status and
// {"detail": "..."}, never 500 or a panic (the router turns a panic into
// 500).
func FuzzRESTRequests(f *testing.F) {
	h, fx := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, route uint8, param, query string, body []byte, key, idempotencyKey string) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		if param == "" {
			param = fx.ids[rt.param]
		}
		path := strings.ReplaceAll(rt.path, "{p}", url.PathEscape(param))
		req, err := http.NewRequest(rt.method, "http://api.test"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.URL.RawQuery = query
		req.RemoteAddr = "192.0.2.1:4321"
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		if key == "" || !validHeaderValue(key) {
			key = fx.keys[rt.auth]
		}
		switch rt.auth {
		case "agent":
			req.Header.Set("X-Agent-Key", key)
		case "merchant":
			req.Header.Set("X-Checkout-Secret-Key", key)
		case "public":
			req.Header.Set("X-Checkout-Public-Key", key)
		}
		if idempotencyKey != "" && validHeaderValue(idempotencyKey) {
			req.Header.Set("Idempotency-Key", idempotencyKey)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		requireSaneAnswer(t, rt, rec)
		if strings.HasSuffix(rt.path, "/keys/roll") && rec.Code == http.StatusOK {
			fx.rolled(t, rec.Body.Bytes())
		}
	})
}

// requireSaneAnswer: no 500, a JSON answer, and {"detail": "..."} alone on
// an error.
func requireSaneAnswer(t *testing.T, rt fuzzRoute, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s %s: %d %s", rt.method, rt.path, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", rt.method, rt.path, ct)
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s %s: not JSON: %s", rt.method, rt.path, rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	var e map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || len(e) != 1 {
		t.Fatalf("%s %s: error body is not {detail}: %s", rt.method, rt.path, rec.Body)
	}
	if d, ok := e["detail"].(string); !ok || d == "" {
		t.Fatalf("%s %s: error body is not {detail}: %s", rt.method, rt.path, rec.Body)
	}
}

// validHeaderValue: net/http refuses to send other values, so the server
// never sees them.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// fuzzFixture is what the fuzzed requests act on: an agent, a merchant
// and its sessions and event.
type fuzzFixture struct {
	keys map[string]string // fuzzRoute.auth → key
	ids  map[string]string // fuzzRoute.param → id
}

// rolled takes the test keys a successful roll answered: the test key
// rolls the test pair only, and the fixture goes on with the new one.
func (fx fuzzFixture) rolled(t *testing.T, body []byte) {
	var rolled struct {
		Keys struct {
			TestSecretKey string `json:"test_secret_key"`
			TestPublicKey string `json:"test_public_key"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &rolled); err != nil || rolled.Keys.TestSecretKey == "" || rolled.Keys.TestPublicKey == "" {
		t.Fatalf("a test key's roll answered no test keys: %s", body)
	}
	fx.keys["merchant"], fx.keys["public"] = rolled.Keys.TestSecretKey, rolled.Keys.TestPublicKey
}

// newFuzzAPI builds the router, dev routes included, on a service from the
// test bundle with an insert-only River client (rate limits are off in
// it, so the fuzzer's many requests are served), and the fixture, made
// through the router itself.
func newFuzzAPI(f *testing.F) (http.Handler, fuzzFixture) {
	f.Helper()
	env := testenv.New(f, testenv.Options{Jobs: true})
	api := newTestAPI(f, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
	svc, db := api.Svc, api.DB
	h := NewRouter(Config{Service: svc, Logger: env.Logger, Dev: true})

	call := func(method, path, key, body string, out any) {
		req := httptest.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if strings.HasPrefix(key, "sk_") {
			req.Header.Set("X-Checkout-Secret-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			f.Fatalf("fixture: %s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			f.Fatal(err)
		}
	}
	var agent struct {
		AgentID string `json:"agent_id"`
		APIKey  string `json:"api_key"`
	}
	call(http.MethodPost, "/agents/quick-register", "", `{"username": "fuzz_agent"}`, &agent)
	var merchant struct {
		Merchant struct {
			ID string `json:"id"`
		} `json:"merchant"`
		Keys struct {
			TestSecretKey string `json:"test_secret_key"`
			TestPublicKey string `json:"test_public_key"`
		} `json:"keys"`
	}
	call(http.MethodPost, "/checkout/merchants/register", "", `{"name": "Fuzz Shop", "email": "fuzz@shop.test"}`, &merchant)
	sk := merchant.Keys.TestSecretKey
	var s1, s2 sessionEnvelope
	call(http.MethodPost, "/checkout/sessions", sk, `{"amount": 12.5, "currency": "USD", "metadata": {"order": 1}}`, &s1)
	call(http.MethodPost, "/checkout/sessions", sk, `{"amount": 3, "currency": "USD"}`, &s2)
	var ev *ent.WebhookEvent
	err := db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		ev, err = svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
			MerchantID: uuid.MustParse(merchant.Merchant.ID), Type: agentpay.EventSessionExpired,
			At: time.Now(), Data: agentpay.EventData{SessionExternalID: s1.Session.ExternalID},
		})
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	return h, fuzzFixture{
		keys: map[string]string{"agent": agent.APIKey, "merchant": sk, "public": merchant.Keys.TestPublicKey},
		ids: map[string]string{
			"agent": agent.AgentID, "session": s1.Session.ExternalID, "cancel": s2.Session.ExternalID, "event": ev.ID.String(),
		},
	}
}

// FuzzAmount: an amount in a request body is a JSON number held exactly:
// Amount reads numbers only (not strings, null or anything else), and what
// it reads it writes back as the same number.
func FuzzAmount(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		var a httpx.Amount
		if err := json.Unmarshal(raw, &a); err != nil {
			return
		}
		var n0 json.Number
		if err := json.Unmarshal(raw, &n0); err != nil {
			t.Fatalf("read %q, which is not a JSON number", raw)
		}
		out, err := a.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back httpx.Amount
		if err := back.UnmarshalJSON(out); err != nil || !back.Equal(a.Decimal) {
			t.Fatalf("%q read as %s, written as %s, read back as %v (%v)", raw, a, out, back, err)
		}
		var n json.Number
		if err := json.Unmarshal(out, &n); err != nil {
			t.Fatalf("%q written as %s, which is not a JSON number", raw, out)
		}
	})
}
