package rest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
)

// agentPayAPI is an API whose agents' wallets and test-mode checkout share
// a base devnet (a block every 50 ms, 2 confirmations).
func agentPayAPI(t *testing.T) *testAPI {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	return newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
}

// An agent pays a test session over REST: 200 with the payment detected
// (recorded from its transaction, no scan yet) and the session confirming;
// the same Idempotency-Key answers it again, replayed; refusals are
// {detail} with the spec's statuses.
func TestAgentPayOverREST(t *testing.T) {
	api := agentPayAPI(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD"})
	live, _ := api.createSession(m.live(), map[string]any{"amount": 1, "currency": "USD"})
	buyer := api.register("buyer_rest")
	api.Env.Fund(t, chains.Base, buyer.Base, 20_000_000)

	path := "/checkout/pay/" + sess.Session.ExternalID + "/agent-pay"
	h := agentKey(buyer.APIKey)
	h.Set("Idempotency-Key", "order-1")
	resp := api.do(http.MethodPost, path, nil, h)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Contains(t, string(resp.Body), `"amount_usd":12.5`)
	body := resp.Map(t)
	require.Equal(t, "detected", body["status"])
	require.Equal(t, "confirming", body["session_status"])
	require.Equal(t, "base", body["chain"])
	require.Regexp(t, `^pay_`, body["payment_id"])
	extra := sessionExtra(sess.Session.ExternalID)
	extra[body["payment_id"].(string)] = "<payment_id>"
	assertGolden(t, "agent_pay_detected", resp.Body, extra)

	again := api.do(http.MethodPost, path, nil, h)
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, body["payment_id"], again.Map(t)["payment_id"])

	for _, tc := range []struct {
		name   string
		path   string
		body   any
		header http.Header
		status int
		detail string
	}{
		{"no key", path, nil, nil, 401, "invalid or missing API key"},
		{"unknown session", "/checkout/pay/cs_test_nope/agent-pay", nil, agentKey(buyer.APIKey), 404, "not found"},
		{"paid session", path, map[string]any{}, agentKey(buyer.APIKey), 409, "already has a payment"},
		{"live session", "/checkout/pay/" + live.Session.ExternalID + "/agent-pay", nil, agentKey(buyer.APIKey), 409, "live-mode session"},
		{"bad chain", "/checkout/pay/" + live.Session.ExternalID + "/agent-pay", map[string]any{"chain": "dogechain"}, agentKey(buyer.APIKey), 400, "chain"},
		{"unknown field", path, map[string]any{"amount": 1}, agentKey(buyer.APIKey), 400, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, tc.path, tc.body, tc.header)
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
			require.Contains(t, resp.Map(t)["detail"], tc.detail)
		})
	}
}

// An agent pays a test session of one of our merchants over REST with
// internal settlement on: 200 with the payment and the session confirmed
// in the answer, tx_hash null and the internal reference; the same
// Idempotency-Key answers it again, replayed.
func TestAgentPayInternalOverREST(t *testing.T) {
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest, InternalSettlement: true}})
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD"})
	buyer := api.register("buyer_internal")
	api.Env.Fund(t, chains.Base, buyer.Base, 20_000_000)

	path := "/checkout/pay/" + sess.Session.ExternalID + "/agent-pay"
	h := agentKey(buyer.APIKey)
	h.Set("Idempotency-Key", "order-internal-1")
	resp := api.do(http.MethodPost, path, nil, h)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Contains(t, string(resp.Body), `"tx_hash":null`)
	body := resp.Map(t)
	require.Equal(t, "confirmed", body["status"])
	require.Equal(t, "confirmed", body["session_status"])
	require.Equal(t, agentpay.InternalRefPrefix+body["transaction_id"].(string), body["internal_reference"])
	extra := sessionExtra(sess.Session.ExternalID)
	extra[body["payment_id"].(string)] = "<payment_id>"
	extra[body["transaction_id"].(string)] = "<transaction_id>"
	assertGolden(t, "agent_pay_internal", resp.Body, extra)

	again := api.do(http.MethodPost, path, nil, h)
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, body["payment_id"], again.Map(t)["payment_id"])
}
