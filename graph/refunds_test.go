package graph

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/payment"
	"agentpay/internal/testenv"
)

// TestMerchantRefunds: createRefund records a refund of the caller's
// session's payment (replayed under the same idempotencyKey, refused
// under it for another request), refunds lists it, and another merchant
// gets NOT_FOUND.
func TestMerchantRefunds(t *testing.T) {
	api := newMerchantAPIIn(t, testenv.Options{Chains: []chains.Name{chains.Base}, Jobs: true})
	m := api.register(t, "Refund Shop", agentpay.MerchantInput{})
	ids := api.createSessions(t, m.Keys.TestSecretKey, 1, time.Now().Add(-time.Hour))
	p := api.recordPayment(t, ids[0], 1_000_000, payment.StatusConfirmed, time.Now())

	const create = `mutation($id: String!, $in: RefundInput, $key: String) {
		createRefund(externalId: $id, input: $in, idempotencyKey: $key) {
			replayed refund { externalId status amountUsd toAddress reason payment { externalId refundedToken } }
		}
	}`
	type result struct {
		CreateRefund struct {
			Replayed bool
			Refund   struct {
				ExternalID, Status, ToAddress, Reason string
				AmountUsd                             json.Number
				Payment                               struct {
					ExternalID    string
					RefundedToken json.Number
				}
			}
		}
	}
	vars := map[string]any{"id": ids[0], "in": map[string]any{"amountUsd": "0.4", "reason": "late delivery"}, "key": "k-1"}
	var first, again result
	api.do(t, m.Keys.TestSecretKey, create, vars).decode(t, &first)
	r := first.CreateRefund.Refund
	require.False(t, first.CreateRefund.Replayed)
	require.Regexp(t, `^re_`, r.ExternalID)
	require.Equal(t, "PENDING", r.Status)
	require.Equal(t, json.Number("0.4"), r.AmountUsd)
	require.Equal(t, "0x1111111111111111111111111111111111111111", r.ToAddress)
	require.Equal(t, p.ExternalID, r.Payment.ExternalID)
	require.Equal(t, json.Number("400000"), r.Payment.RefundedToken)

	api.do(t, m.Keys.TestSecretKey, create, vars).decode(t, &again)
	require.True(t, again.CreateRefund.Replayed)
	require.Equal(t, r.ExternalID, again.CreateRefund.Refund.ExternalID)

	vars["in"] = map[string]any{"amountUsd": "0.5"}
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", api.do(t, m.Keys.TestSecretKey, create, vars).code(t))
	delete(vars, "key")
	vars["in"] = map[string]any{"amountUsd": "0.600001"}
	require.Equal(t, "BAD_USER_INPUT", api.do(t, m.Keys.TestSecretKey, create, vars).code(t))

	const list = `query($id: String!) { refunds(externalId: $id) { externalId amountUsd } }`
	var l struct {
		Refunds []struct {
			ExternalID string
			AmountUsd  json.Number
		}
	}
	api.do(t, m.Keys.TestSecretKey, list, map[string]any{"id": ids[0]}).decode(t, &l)
	require.Len(t, l.Refunds, 1)
	require.Equal(t, r.ExternalID, l.Refunds[0].ExternalID)

	other := api.register(t, "Other Shop", agentpay.MerchantInput{})
	require.Equal(t, "NOT_FOUND", api.do(t, other.Keys.TestSecretKey, list, map[string]any{"id": ids[0]}).code(t))
	require.Equal(t, "NOT_FOUND", api.do(t, m.Keys.LiveSecretKey, create, map[string]any{"id": ids[0]}).code(t))
}

// TestRefundRulesOverGraphQL: a dashboard session (an owner's) refunds to
// the payer only, FORBIDDEN to another address, which the secret key may
// name; each refund shows its destination and credential. After the
// payout, a refund the merchant's unsettled money does not cover is
// BAD_USER_INPUT saying what is available.
func TestRefundRulesOverGraphQL(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, Jobs: true})
	srv := newTestServer(t, env, agentpay.Config{AgentMode: agentpay.ModeTest}, HandlerConfig{})
	viewer := &viewerAPI{agentAPI: &agentAPI{URL: srv.URL, DB: env.DB, Svc: srv.Svc}, env: env}
	api := &merchantAPI{URL: srv.URL, DB: env.DB, Svc: srv.Svc}
	owner, session, csrf := viewer.signIn(t, "refund_owner")
	reg, err := api.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: ptr("Refund Shop"), Email: ptr(owner.Email)})
	require.NoError(t, err)
	viewer.confirmContactEmail(t, owner.Email)
	ids := api.createSessions(t, reg.Keys.TestSecretKey, 1, time.Now().Add(-time.Hour))
	p := api.recordPayment(t, ids[0], 1_000_000, payment.StatusConfirmed, time.Now())
	dash := viewer.openDashboard(t, session, csrf, reg.Merchant.ID, "TEST")
	require.Equal(t, "OWNER", dash.Role)

	const create = `mutation($id: String!, $in: RefundInput) {
		createRefund(externalId: $id, input: $in) { refund { toAddress destination requestedWith afterPayout reservedToken } }
	}`
	type result struct {
		CreateRefund struct {
			Refund struct {
				ToAddress, Destination, RequestedWith string
				AfterPayout                           bool
				ReservedToken                         json.Number
			}
		}
	}
	const other = "0x3333333333333333333333333333333333333333"
	vars := func(amount, address string) map[string]any {
		in := map[string]any{"amountUsd": amount}
		if address != "" {
			in["address"] = address
		}
		return map[string]any{"id": ids[0], "in": in}
	}

	forbidden := viewer.asDashboard(t, dash.Token, create, vars("0.1", other))
	require.Equal(t, "FORBIDDEN", forbidden.code(t))
	require.Contains(t, forbidden.Errors[0].Message, "needs the merchant's secret key")
	var r result
	viewer.asDashboard(t, dash.Token, create, vars("0.1", "")).decode(t, &r)
	require.Equal(t, "0x1111111111111111111111111111111111111111", r.CreateRefund.Refund.ToAddress)
	require.Equal(t, "PAYER", r.CreateRefund.Refund.Destination)
	require.Equal(t, "DASHBOARD_SESSION", r.CreateRefund.Refund.RequestedWith)

	api.do(t, reg.Keys.TestSecretKey, create, vars("0.1", other)).decode(t, &r)
	require.Equal(t, other, r.CreateRefund.Refund.ToAddress)
	require.Equal(t, "CHOSEN", r.CreateRefund.Refund.Destination)
	require.Equal(t, "SECRET_KEY", r.CreateRefund.Refund.RequestedWith)

	// Paid out (0.8 left, net 0.7992): the merchant holds nothing unsettled.
	require.NoError(t, api.DB.Ent.Payment.UpdateOne(p).SetSettlementStatus(payment.SettlementStatusCompleted).
		SetSettlementFee(800).SetSettlementNet(799_200).Exec(ctx))
	after := api.do(t, reg.Keys.TestSecretKey, create, vars("0.1", other))
	require.Equal(t, "BAD_USER_INPUT", after.code(t))
	require.Contains(t, after.Errors[0].Message, "0 USDC available")
}
