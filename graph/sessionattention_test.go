package graph

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/graph/model"
	"agentpay/internal/testenv"
)

// TestSessionAttention: a session's attention answers the rule's flags
// (underpaid while open, then held once expired, with a late payment
// beside it), each kind one of the schema's, and none for a session paid
// as asked.
func TestSessionAttention(t *testing.T) {
	ctx := context.Background()
	api := newMerchantAPIIn(t, testenv.Options{Chains: []chains.Name{chains.Base}})
	m := api.register(t, "Attention Shop", agentpay.MerchantInput{})
	key := m.Keys.TestSecretKey
	ids := api.createSessions(t, key, 2, time.Now().Add(-time.Hour)) // 1.00 and 2.00 USD
	const q = `query($id: String!) { session(externalId: $id) { attention { kind paymentExternalId amount advice } } }`
	type flag struct {
		Kind              string
		PaymentExternalID *string
		Amount            json.Number
		Advice            string
	}
	attention := func(id string) []flag {
		var out struct{ Session struct{ Attention []flag } }
		api.do(t, key, q, map[string]any{"id": id}).decode(t, &out)
		return out.Session.Attention
	}
	require.Empty(t, attention(ids[0]), "no payment, nothing to do")

	// 0.40 of 2.00 arrived: underpaid, 1.60 due.
	api.recordPayment(t, ids[1], 400_000, payment.StatusConfirmed, time.Now())
	got := attention(ids[1])
	require.Len(t, got, 1)
	require.Equal(t, "UNDERPAID", got[0].Kind)
	require.Nil(t, got[0].PaymentExternalID)
	require.Equal(t, json.Number("1.6"), got[0].Amount)
	require.Contains(t, got[0].Advice, "0.40 USD of 2.00 USD arrived and 1.60 USD is still due")

	// Expired: the part-payment is held; a payment after it is late.
	require.NoError(t, api.DB.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(ids[1])).
		SetStatus(checkoutsession.StatusExpired).Exec(ctx))
	late := api.recordPayment(t, ids[1], 2_000_000, payment.StatusConfirmed, time.Now())
	require.NoError(t, api.DB.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(ids[1])).
		SetStatus(checkoutsession.StatusExpired).Exec(ctx)) // recordPayment set detecting
	require.NoError(t, api.DB.Ent.Payment.UpdateOne(late).SetLate(true).Exec(ctx))
	got = attention(ids[1])
	require.Len(t, got, 2)
	require.Equal(t, "UNDERPAID_ENDED", got[0].Kind)
	require.Equal(t, json.Number("0.4"), got[0].Amount)
	require.Equal(t, "LATE_PAYMENT", got[1].Kind)
	require.Equal(t, late.ExternalID, *got[1].PaymentExternalID)
	require.Contains(t, got[1].Advice, "Late: 2.00 USD arrived after the session expired.")

	other := api.register(t, "Other Shop", agentpay.MerchantInput{})
	require.Equal(t, "NOT_FOUND", api.do(t, other.Keys.TestSecretKey, q, map[string]any{"id": ids[1]}).code(t))
}

// TestSessionAttentionKinds: every kind of the rule is a value of the
// schema's enum (the resolver only upper-cases it).
func TestSessionAttentionKinds(t *testing.T) {
	for _, k := range []agentpay.AttentionKind{agentpay.AttentionUnderpaid, agentpay.AttentionUnderpaidEnded,
		agentpay.AttentionOverpaid, agentpay.AttentionLatePayment, agentpay.AttentionRepeatPayment} {
		require.True(t, model.SessionAttentionKind(strings.ToUpper(string(k))).IsValid(), k)
	}
	require.Len(t, model.AllSessionAttentionKind, 5)
}
