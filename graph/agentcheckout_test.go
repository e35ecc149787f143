package graph

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
)

// agentPaySession is a session of a fresh merchant, in the mode livemode.
func agentPaySession(t *testing.T, api *agentAPI, amount string, livemode bool) *ent.CheckoutSession {
	t.Helper()
	ctx := context.Background()
	name, email := "Shop", "shop@example.com"
	reg, err := api.Svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	prefix := "cs_test_"
	if livemode {
		prefix = "cs_live_"
	}
	return api.DB.Ent.CheckoutSession.Create().
		SetMerchantID(reg.Merchant.ID).SetExternalID(prefix + uuid.NewString()[:24]).SetLivemode(livemode).
		SetAmountUsd(decimal.RequireFromString(amount)).SetCurrency("USD").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).SaveX(ctx)
}

// TestPayCheckoutMutation: payCheckout pays the session's exact amount and
// answers the payment detected; the same idempotencyKey replays it; a live
// session is CONFLICT for agents on the test networks.
func TestPayCheckoutMutation(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{Base: true})
	a := api.register(t, uniqueName(t, "payer"))
	_, err := api.Base.Send(context.Background(), common.HexToAddress(a.Wallets[1].Address), big.NewInt(10_000_000))
	require.NoError(t, err)
	sess := agentPaySession(t, api, "4.2", false)

	const m = `mutation($in: PayCheckoutInput!) { payCheckout(input: $in) {
		transactionId paymentId sessionId sessionStatus status amountUsd chain txHash fromAddress toAddress
		confirmations requiredConfirmations message replayed } }`
	var out struct {
		PayCheckout struct {
			TransactionID, SessionID, SessionStatus, Status, Chain, FromAddress, ToAddress, Message string
			PaymentID, TxHash                                                                       *string
			AmountUsd                                                                               json.Number
			Confirmations                                                                           int
			Replayed                                                                                bool
		}
	}
	in := map[string]any{"in": map[string]any{"externalId": sess.ExternalID, "idempotencyKey": "k1"}}
	api.do(t, a.APIKey, m, in).decode(t, &out)
	p := out.PayCheckout
	require.Equal(t, "DETECTED", p.Status)
	require.Equal(t, "CONFIRMING", p.SessionStatus)
	require.Equal(t, "4.2", p.AmountUsd.String())
	require.Equal(t, "base", p.Chain)
	require.NotNil(t, p.PaymentID)
	require.NotNil(t, p.TxHash)
	require.False(t, p.Replayed)

	api.do(t, a.APIKey, m, in).decode(t, &out)
	require.True(t, out.PayCheckout.Replayed)
	require.Equal(t, *p.PaymentID, *out.PayCheckout.PaymentID)

	live := agentPaySession(t, api, "1", true)
	res := api.do(t, a.APIKey, m, map[string]any{"in": map[string]any{"externalId": live.ExternalID}})
	require.Equal(t, "CONFLICT", res.code(t))
	res = api.do(t, "", m, in)
	require.Equal(t, "UNAUTHENTICATED", res.code(t))
}

// TestPayCheckoutMutationInternal: with internal settlement on, the
// mutation answers the payment confirmed, txHash null and the internal
// reference.
func TestPayCheckoutMutationInternal(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{Base: true, InternalSettlement: true})
	a := api.register(t, uniqueName(t, "payer"))
	_, err := api.Base.Send(context.Background(), common.HexToAddress(a.Wallets[1].Address), big.NewInt(10_000_000))
	require.NoError(t, err)
	sess := agentPaySession(t, api, "4.2", false)

	const m = `mutation($in: PayCheckoutInput!) { payCheckout(input: $in) {
		transactionId status sessionStatus txHash internalReference } }`
	var out struct {
		PayCheckout struct {
			TransactionID, Status, SessionStatus string
			TxHash, InternalReference            *string
		}
	}
	api.do(t, a.APIKey, m, map[string]any{"in": map[string]any{"externalId": sess.ExternalID}}).decode(t, &out)
	p := out.PayCheckout
	require.Equal(t, "CONFIRMED", p.Status)
	require.Equal(t, "CONFIRMED", p.SessionStatus)
	require.Nil(t, p.TxHash)
	require.NotNil(t, p.InternalReference)
	require.Equal(t, agentpay.InternalRefPrefix+p.TransactionID, *p.InternalReference)
}

// TestPayCheckoutSessionSubscription: the session's status subscription
// follows an agent's payment as any payment: detecting when the agent
// takes the session, then confirming with the amount paid.
func TestPayCheckoutSessionSubscription(t *testing.T) {
	api := newAgentAPI(t, agentAPIConfig{Base: true})
	a := api.register(t, uniqueName(t, "subpayer"))
	_, err := api.Base.Send(context.Background(), common.HexToAddress(a.Wallets[1].Address), big.NewInt(10_000_000))
	require.NoError(t, err)
	sess := agentPaySession(t, api, "4.2", false)
	c := subscribeStatus(t, api.URL, sess.ExternalID)
	require.Equal(t, "PENDING", c.nextStatus().Status)

	var out struct{ PayCheckout struct{ Status string } }
	api.do(t, a.APIKey, `mutation($in: PayCheckoutInput!) { payCheckout(input: $in) { status } }`,
		map[string]any{"in": map[string]any{"externalId": sess.ExternalID}}).decode(t, &out)
	require.Equal(t, "DETECTED", out.PayCheckout.Status)

	var seen []string
	st := c.nextStatus()
	for seen = append(seen, st.Status); st.Status != "CONFIRMING" && len(seen) < 5; seen = append(seen, st.Status) {
		st = c.nextStatus()
	}
	require.Equal(t, "CONFIRMING", st.Status, "statuses seen: %v", seen)
	require.Equal(t, "4.2", st.AmountPaid.String())
	require.Equal(t, "base", *st.Chain)
}
