package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/cardissuer/sandbox"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/user"
	"agentpay/internal/testenv"
)

// The agent's card purchase endpoints: refusals with what is missing, the
// request (201, golden), the list, the card read once, then only its last
// four digits; /dev/card/charge approves once and declines after.
func TestCardPurchasesOverREST(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true, Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest, CardIssuer: sandbox.New()}})
	dev := httptest.NewServer(NewRouter(Config{Service: api.Svc, Logger: discardLogger(), Dev: true}))
	t.Cleanup(dev.Close)
	ctx := context.Background()
	reg := api.register("card_agent")
	raiseTier(t, api, reg.ID) // T0's 10 requests a minute would not last the test
	key := agentKey(reg.APIKey)
	body := map[string]any{"amount_usd": 12.5, "merchant_name": "Acme Books", "description": "a book on payments"}

	resp := api.do(http.MethodPost, "/agents/me/pairings/card/request-purchase", body, key)
	require.Equal(t, http.StatusForbidden, resp.Status, string(resp.Body))
	require.Contains(t, resp.Map(t)["detail"], "no approved pairing")

	u := api.newUser("card_human")
	pv, err := api.Svc.RequestPairing(ctx, mustAgent(t, api, reg.ID), agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = api.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	resp = api.do(http.MethodPost, "/agents/me/pairings/card/request-purchase", body, key)
	require.Equal(t, http.StatusForbidden, resp.Status, string(resp.Body))
	require.Contains(t, resp.Map(t)["detail"], "identity verification")

	u, err = api.DB.Ent.User.UpdateOne(u).SetIdentityStatus(user.IdentityStatusVerified).Save(ctx)
	require.NoError(t, err)
	resp = api.do(http.MethodPost, "/agents/me/pairings/card/request-purchase", body, key)
	require.Equal(t, http.StatusBadRequest, resp.Status, string(resp.Body))
	require.Contains(t, resp.Map(t)["detail"], "insufficient balance")

	env.Fund(t, chains.Base, reg.Base, 20_000_000)
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"below the minimum", map[string]any{"amount_usd": 0.49, "merchant_name": "A"}, http.StatusBadRequest},
		{"no merchant", map[string]any{"amount_usd": 1}, http.StatusBadRequest},
		{"no amount", map[string]any{"merchant_name": "A"}, http.StatusBadRequest},
		{"an unknown field", map[string]any{"amount_usd": 1, "merchant_name": "A", "tip": 1}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/agents/me/pairings/card/request-purchase", tc.body, key)
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
		})
	}

	h := key.Clone()
	h.Set("Idempotency-Key", "card-1")
	resp = api.do(http.MethodPost, "/agents/me/pairings/card/request-purchase", body, h)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	extra := map[string]string{u.Username: "<username>"}
	assertGolden(t, "card_request_purchase", resp.Body, extra)
	id := resp.Map(t)["request_id"].(string)
	again := api.do(http.MethodPost, "/agents/me/pairings/card/request-purchase", body, h)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, id, again.Map(t)["request_id"])

	list := api.do(http.MethodGet, "/agents/me/pairings/card/requests", nil, key)
	require.Equal(t, http.StatusOK, list.Status)
	require.Len(t, list.Map(t)["requests"], 1)

	_, err = api.Svc.ApproveCardRequest(ctx, &agentpay.Viewer{User: u}, id, "", nil)
	require.NoError(t, err)
	first := api.do(http.MethodGet, "/agents/me/pairings/card/requests/"+id, nil, key)
	require.Equal(t, http.StatusOK, first.Status, string(first.Body))
	require.Equal(t, "no-store", first.Header.Get("Cache-Control"))
	card := first.Map(t)["card"].(map[string]any)
	details := card["details"].(map[string]any)
	number := details["number"].(string)
	extra[card["card_token"].(string)] = "<ctok>"
	extra[number] = "<number>"
	extra[`"cvc": "`+details["cvc"].(string)+`"`] = `"cvc": "<cvc>"`
	extra[`"last4": "`+card["last4"].(string)+`"`] = `"last4": "<last4>"`
	extra[fmt.Sprintf(`"exp_month": %v`, details["exp_month"])] = `"exp_month": "<month>"`
	extra[fmt.Sprintf(`"exp_year": %v`, details["exp_year"])] = `"exp_year": "<year>"`
	assertGolden(t, "card_request_revealed", first.Body, extra)
	second := api.do(http.MethodGet, "/agents/me/pairings/card/requests/"+id, nil, key)
	require.Equal(t, http.StatusOK, second.Status)
	require.NotContains(t, string(second.Body), number)
	require.Nil(t, second.Map(t)["card"].(map[string]any)["details"])
	require.Equal(t, http.StatusNotFound, api.do(http.MethodGet, "/agents/me/pairings/card/requests/"+uuid.NewString(), nil, key).Status)

	charge := func(amount float64, merchant string) map[string]any {
		t.Helper()
		resp := doAt(t, dev.URL, http.MethodPost, "/dev/card/charge", map[string]any{
			"card_number": number, "exp_month": details["exp_month"], "exp_year": details["exp_year"], "cvc": details["cvc"],
			"amount_usd": amount, "merchant_name": merchant,
		})
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		return resp.Map(t)
	}
	require.Equal(t, false, charge(1, "Elsewhere")["approved"])
	ok := charge(10, "Acme Books")
	require.Equal(t, true, ok["approved"], ok)
	require.EqualValues(t, 2.5, ok["returned_usd"])
	declined := charge(1, "Acme Books")
	require.Equal(t, false, declined["approved"])
	require.Equal(t, "card closed", declined["decline_reason"])
	used := api.do(http.MethodGet, "/agents/me/pairings/card/requests/"+id, nil, key).Map(t)
	require.Equal(t, "used", used["status"])
	require.EqualValues(t, 10, used["charged_usd"])
	require.EqualValues(t, 2.5, used["returned_usd"])
	require.Equal(t, "10", agentpay.FromBaseUnits(env.Balance(t, chains.Base, reg.Base), 6).String(), "20 - 12.5 + 2.5")
}

func mustAgent(t *testing.T, api *testAPI, id string) *ent.Agent {
	t.Helper()
	a, err := api.DB.Ent.Agent.Get(context.Background(), uuid.MustParse(id))
	require.NoError(t, err)
	return a
}

// doAt posts JSON to a dev-only route (not in the OpenAPI document).
func doAt(t *testing.T, base, method, path string, body any) apiResponse {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return apiResponse{Status: resp.StatusCode, Header: resp.Header, Body: out}
}
