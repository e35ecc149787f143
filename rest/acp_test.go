package rest

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

// acpSchemaID is the $id of ACP's 2026-04-17 schema bundle
// (testdata/acp, Apache-2.0).
const acpSchemaID = "https://example.com/schemas/agentic-checkout/bundle.schema.json"

var (
	acpSchemasOnce sync.Once
	acpCompiler    *jsonschema.Compiler
	acpSchemaErr   error
	acpSchemaMu    sync.Mutex
)

// acpValidate checks raw against ACP's $defs/<def>.
func acpValidate(t testing.TB, def string, raw []byte) {
	t.Helper()
	acpSchemasOnce.Do(func() {
		f, err := os.Open("../testdata/acp/schema.agentic_checkout.json")
		if err != nil {
			acpSchemaErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			acpSchemaErr = err
			return
		}
		acpCompiler = jsonschema.NewCompiler()
		acpCompiler.AssertFormat()
		acpSchemaErr = acpCompiler.AddResource(acpSchemaID, doc)
	})
	require.NoError(t, acpSchemaErr)
	acpSchemaMu.Lock()
	sch, err := acpCompiler.Compile(acpSchemaID + "#/$defs/" + def)
	acpSchemaMu.Unlock()
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	require.NoError(t, err, string(raw))
	require.NoError(t, sch.Validate(inst), "%s: %s", def, raw)
}

// acpDo sends an ACP request (its body validated as def when def is set)
// with the merchant's secret key as bearer.
func (a *testAPI) acpDo(method, path, secret, key, def string, body any) apiResponse {
	a.t.Helper()
	h := http.Header{"Authorization": {"Bearer " + secret}, "Api-Version": {"2026-04-17"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(a.t, err)
		if def != "" {
			acpValidate(a.t, def, raw)
		}
	}
	return a.do(method, path, body, h)
}

func acpCreateBody(cents int64) map[string]any {
	return map[string]any{
		"currency":     "usd",
		"line_items":   []any{map[string]any{"id": "book_1", "name": "A book", "unit_amount": cents}},
		"buyer":        map[string]any{"first_name": "Ada", "email": "ada@example.com"},
		"capabilities": map[string]any{},
	}
}

// TestACPCheckout: an agent creates an ACP checkout with the merchant's
// key, replays it (Idempotent-Replayed, the same session), is refused the
// same key with another body, completes it with an x402 v2 payment payload
// of a USDC EIP-3009 authorization on the base devnet (relayed: the
// payer's balance falls by the price), and every request and answer
// matches ACP's JSON schema.
func TestACPCheckout(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sk := m.TestSecret

	resp := api.acpDo(http.MethodPost, "/checkout_sessions", sk, "create-1", "CheckoutSessionCreateRequest", acpCreateBody(1250))
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	acpValidate(t, "CheckoutSession", resp.Body)
	require.Equal(t, "2026-04-17", resp.Header.Get("API-Version"))
	created := resp.Map(t)
	id := created["id"].(string)
	require.Equal(t, "ready_for_payment", created["status"])
	require.Equal(t, []any{
		map[string]any{"type": "subtotal", "display_text": "Subtotal", "amount": 1250.0},
		map[string]any{"type": "total", "display_text": "Total", "amount": 1250.0},
	}, created["totals"])

	// Replay: the same session, flagged.
	resp = api.acpDo(http.MethodPost, "/checkout_sessions", sk, "create-1", "CheckoutSessionCreateRequest", acpCreateBody(1250))
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, id, resp.Map(t)["id"])
	// The same key with another body: ACP's 422 idempotency_conflict.
	resp = api.acpDo(http.MethodPost, "/checkout_sessions", sk, "create-1", "CheckoutSessionCreateRequest", acpCreateBody(999))
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
	acpValidate(t, "Error", resp.Body)
	require.Equal(t, "idempotency_conflict", resp.Map(t)["code"])

	// The payment: the session's x402 requirements, signed by the payer.
	payer := newX402Payer(t, api, 20_000_000)
	ch := api.x402Do(http.MethodGet, "/checkout/pay/"+id+"/x402", nil, nil)
	require.Equal(t, http.StatusPaymentRequired, ch.Status, string(ch.Body))
	pr := paymentRequired(t, ch.Header)
	sig := payer.payV2(t, pr.Resource, pr.Accepts[0], "12500000", "").Get("Payment-Signature")
	complete := map[string]any{"payment_data": map[string]any{
		"handler_id": "agentpay_x402",
		"instrument": map[string]any{"type": "crypto", "credential": map[string]any{"type": "x402_payment_payload", "token": sig}},
	}}
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "complete-1", "CheckoutSessionCompleteRequest", complete)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	acpValidate(t, "CheckoutSession", resp.Body)
	require.Equal(t, "complete_in_progress", resp.Map(t)["status"])
	require.Equal(t, int64(7_500_000), api.Env.Balance(t, chains.Base, payer.addr).Int64())

	// A replay of complete pays nothing again.
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "complete-1", "CheckoutSessionCompleteRequest", complete)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	require.Equal(t, int64(7_500_000), api.Env.Balance(t, chains.Base, payer.addr).Int64())

	resp = api.acpDo(http.MethodGet, "/checkout_sessions/"+id, sk, "", "", nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	acpValidate(t, "CheckoutSession", resp.Body)
}

// TestACPRefusals: bad input answers ACP's Error and changes nothing;
// cancel moves the session to canceled and is replayed.
func TestACPRefusals(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sk := m.TestSecret

	cases := []struct {
		name, key, secret, code string
		body                    any
		status                  int
	}{
		{"no key", "", sk, "idempotency_key_required", acpCreateBody(100), http.StatusBadRequest},
		{"bad bearer", "k1", "sk_test_nope", "unauthorized", acpCreateBody(100), http.StatusUnauthorized},
		{"euro", "k2", sk, "invalid", map[string]any{"currency": "eur", "line_items": []any{map[string]any{"id": "x", "unit_amount": 100}}}, http.StatusUnprocessableEntity},
		{"no price", "k3", sk, "invalid", map[string]any{"currency": "usd", "line_items": []any{map[string]any{"id": "x"}}}, http.StatusUnprocessableEntity},
		{"not json", "k4", sk, "invalid_json", "{", http.StatusBadRequest},
	}
	for _, c := range cases {
		resp := api.acpDo(http.MethodPost, "/checkout_sessions", c.secret, c.key, "", c.body)
		require.Equal(t, c.status, resp.Status, "%s: %s", c.name, resp.Body)
		acpValidate(t, "Error", resp.Body)
		require.Equal(t, c.code, resp.Map(t)["code"], c.name)
	}
	list := api.do(http.MethodGet, "/checkout/sessions", nil, m.test())
	require.Equal(t, float64(0), list.Map(t)["total"], "a refused create makes no session")

	resp := api.acpDo(http.MethodPost, "/checkout_sessions", sk, "c", "CheckoutSessionCreateRequest", acpCreateBody(500))
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	id := resp.Map(t)["id"].(string)
	cancel := map[string]any{"intent_trace": map[string]any{"reason_code": "price_sensitivity"}}
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/cancel", sk, "x1", "CancelSessionRequest", cancel)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	acpValidate(t, "CheckoutSession", resp.Body)
	require.Equal(t, "canceled", resp.Map(t)["status"])
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/cancel", sk, "x1", "CancelSessionRequest", cancel)
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))

	resp = api.acpDo(http.MethodGet, "/checkout_sessions/cs_test_none", sk, "", "", nil)
	require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
	acpValidate(t, "Error", resp.Body)

	resp = api.do(http.MethodGet, "/.well-known/acp.json", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	acpValidate(t, "DiscoveryResponse", resp.Body)
}

// TestACPCompleteWithMPP: the crypto handler takes an MPP credential made
// by mppx 0.11.0 (npm, testdata/mppclient, under node) for the session's
// Payment challenge at its MPP address, never sent there: complete settles
// it (the payer's USDC falls by the price, once, replay included), the
// session completes, and a credential of another session is refused with
// ACP's Error, changing nothing.
func TestACPCompleteWithMPP(t *testing.T) {
	node, dir := mppNodeDir(t)
	api := x402API(t)
	m := api.registerMerchant(nil)
	sk := m.TestSecret

	create := func(key string, cents int64) string {
		resp := api.acpDo(http.MethodPost, "/checkout_sessions", sk, key, "CheckoutSessionCreateRequest", acpCreateBody(cents))
		require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
		return resp.Map(t)["id"].(string)
	}
	id, other := create("create-mpp", 1250), create("create-other", 300)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	payer := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(t, chains.Base, payer, 20_000_000)

	credentialFor := func(sessionID string) string {
		got := runMPPClient(t, api, node, dir, api.Server.URL+"/checkout/pay/"+sessionID+"/mpp", key, "CREDENTIAL_ONLY=1")
		cred, _ := got["credential"].(string)
		require.True(t, strings.HasPrefix(cred, "Payment "), "%v", got)
		return cred
	}
	completeBody := func(token string) map[string]any {
		return map[string]any{"payment_data": map[string]any{
			"handler_id": "agentpay_x402",
			"instrument": map[string]any{"type": "crypto", "credential": map[string]any{"type": "mpp_credential", "token": token}},
		}}
	}

	// A credential for another session is refused here: nothing paid.
	resp := api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "wrong", "CheckoutSessionCompleteRequest",
		completeBody(strings.TrimPrefix(credentialFor(other), "Payment ")))
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
	acpValidate(t, "Error", resp.Body)
	require.Equal(t, int64(20_000_000), api.Env.Balance(t, chains.Base, payer).Int64())

	// The token is the credential without its scheme (the scheme is taken too).
	token := strings.TrimPrefix(credentialFor(id), "Payment ")
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "complete-mpp", "CheckoutSessionCompleteRequest", completeBody(token))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	acpValidate(t, "CheckoutSession", resp.Body)
	require.Contains(t, []any{"complete_in_progress", "completed"}, resp.Map(t)["status"])
	require.Equal(t, int64(7_500_000), api.Env.Balance(t, chains.Base, payer).Int64(), "paid the price")

	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "complete-mpp", "CheckoutSessionCompleteRequest", completeBody(token))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	// The same credential under a new key answers the payment it made.
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "complete-mpp-2", "CheckoutSessionCompleteRequest", completeBody("Payment "+token))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))

	waitConfirmed(t, api, m, id)
	resp = api.acpDo(http.MethodGet, "/checkout_sessions/"+id, sk, "", "", nil)
	require.Equal(t, "completed", resp.Map(t)["status"], string(resp.Body))
	require.Equal(t, 1, sessionPayments(t, api, id), "one payment")
	require.Equal(t, int64(7_500_000), api.Env.Balance(t, chains.Base, payer).Int64(), "paid once")
}
