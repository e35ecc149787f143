package rest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
)

// A paired human's spending policy over REST: a cap and deny by default
// refuse (403 naming the policy), a send above the threshold is held (202,
// golden), followed at GET /agents/me/approvals/{id} (golden) until the
// human approves it and it shows its transfer.
func TestSpendingPolicyOverREST(t *testing.T) {
	env := testenv.New(t, testenv.Options{Jobs: true, Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
	ctx := context.Background()
	reg := api.register("policy_agent")
	raiseTier(t, api, reg.ID)
	to := api.register("policy_payee")
	key := agentKey(reg.APIKey)
	env.Fund(t, chains.Base, reg.Base, 20_000_000)
	u := api.newUser("policy_human")
	pv, err := api.Svc.RequestPairing(ctx, mustAgent(t, api, reg.ID), agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = api.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	v := &agentpay.Viewer{User: u}
	usd := func(s string) *decimal.Decimal { d := decimal.RequireFromString(s); return &d }
	_, err = api.Svc.SetSpendingPolicy(ctx, v, "policy_agent", agentpay.SpendingPolicyInput{
		ApprovalThreshold: usd("2"), PerPaymentCap: usd("5"), DenyByDefault: true})
	require.NoError(t, err)
	send := func(amount float64, h http.Header) apiResponse {
		return api.do(http.MethodPost, "/agents/me/wallet/send", map[string]any{"to_username": "policy_payee", "amount_usd": amount, "chain": "base"}, h)
	}

	resp := send(6, key)
	require.Equal(t, http.StatusForbidden, resp.Status, string(resp.Body))
	require.Equal(t, "insufficient permissions: 6 USD exceeds the per-payment cap of 5 USD in the spending policy set by policy_human", resp.Map(t)["detail"])
	resp = send(3, key)
	require.Equal(t, http.StatusForbidden, resp.Status, string(resp.Body))
	require.Equal(t, "insufficient permissions: 3 USD is above the approval threshold of 2 USD in the spending policy set by policy_human, which denies by default", resp.Map(t)["detail"])

	_, err = api.Svc.SetSpendingPolicy(ctx, v, "policy_agent", agentpay.SpendingPolicyInput{ApprovalThreshold: usd("2")})
	require.NoError(t, err)
	h := key.Clone()
	h.Set("Idempotency-Key", "held-1")
	resp = send(3, h)
	require.Equal(t, http.StatusAccepted, resp.Status, string(resp.Body))
	assertGolden(t, "send_awaiting_approval", resp.Body, nil)
	id, _ := resp.Map(t)["approval_id"].(string)
	again := send(3, h)
	require.Equal(t, http.StatusAccepted, again.Status, string(again.Body))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, id, again.Map(t)["approval_id"])

	resp = api.do(http.MethodGet, "/agents/me/approvals/"+id, nil, key)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "approval_awaiting", resp.Body, nil)
	other := api.do(http.MethodGet, "/agents/me/approvals/"+id, nil, agentKey(to.APIKey))
	require.Equal(t, http.StatusNotFound, other.Status, "another agent's approval")

	_, err = api.Svc.ApproveSpendApproval(ctx, v, id, "", nil)
	require.NoError(t, err)
	resp = api.do(http.MethodGet, "/agents/me/approvals/"+id, nil, key)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "completed", resp.Map(t)["transfer_status"])
	assertGolden(t, "approval_approved", resp.Body, nil)
}
