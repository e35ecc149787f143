package graph

import (
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
