package rest

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testenv"
)

// TestRefundsOverREST: a merchant refunds part of a confirmed payment
// (201), a retry with the same Idempotency-Key answers the same refund
// (200, Idempotent-Replayed), more than is left is 422, and the list shows
// the refund; another merchant's session is 404.
func TestRefundsOverREST(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, Jobs: true,
		Confirmations: map[chains.Name]uint64{chains.Base: 1}})
	api := newTestAPI(t, testAPIConfig{Env: env})
	m := api.registerMerchant(nil)
	key := http.Header{"X-Checkout-Secret-Key": {m.TestSecret}}
	sess, _ := api.createSession(key, map[string]any{"amount": 12.5, "currency": "USD"})
	extID := sess.Session.ExternalID
	d, err := api.Svc.SelectPaymentMethod(ctx, extID, "", "base", "USDC")
	require.NoError(t, err)
	env.Fund(t, chains.Base, d.Address, 12_500_000)
	for i := 0; i < 10; i++ {
		env.EVM(chains.Base).Commit()
		_, err := api.Svc.ScanDeposits(ctx, agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
		var got sessionEnvelope
		api.do(http.MethodGet, "/checkout/sessions/"+extID, nil, key).JSON(t, &got)
		if got.Session.Status == string(checkoutsession.StatusConfirmed) {
			break
		}
	}
	path := "/checkout/sessions/" + extID + "/refunds"

	withKey := http.Header{"X-Checkout-Secret-Key": {m.TestSecret}, "Idempotency-Key": {"order-17-refund"}}
	resp := api.do(http.MethodPost, path, map[string]any{"amount_usd": 2.5, "reason": "damaged"}, withKey)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	var created refundBody
	resp.JSON(t, &created)
	extra := sessionExtra(extID)
	extra[created.RefundID] = "<refund_id>"
	extra[created.PaymentID] = "<payment_id>"
	assertGolden(t, "refund_created", resp.Body, extra)

	again := api.do(http.MethodPost, path, map[string]any{"amount_usd": 2.5, "reason": "damaged"}, withKey)
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(resp.Body), string(again.Body))

	reused := api.do(http.MethodPost, path, map[string]any{"amount_usd": 3}, withKey)
	require.Equal(t, http.StatusUnprocessableEntity, reused.Status, string(reused.Body))

	over := api.do(http.MethodPost, path, map[string]any{"amount_usd": 10.000001}, key)
	require.Equal(t, http.StatusUnprocessableEntity, over.Status, string(over.Body))
	require.Contains(t, string(over.Body), "more than is left to refund")
	bad := api.do(http.MethodPost, path, `{"amount_usd": "ten"}`, key)
	require.Equal(t, http.StatusUnprocessableEntity, bad.Status, string(bad.Body))

	list := api.do(http.MethodGet, path, nil, key)
	require.Equal(t, http.StatusOK, list.Status, string(list.Body))
	assertGolden(t, "refund_list", list.Body, extra)

	other := api.registerMerchant(map[string]any{"name": "Other", "email": "o@other.test"})
	notMine := api.do(http.MethodPost, path, map[string]any{}, http.Header{"X-Checkout-Secret-Key": {other.TestSecret}})
	require.Equal(t, http.StatusNotFound, notMine.Status, string(notMine.Body))
	live := api.do(http.MethodGet, path, nil, http.Header{"X-Checkout-Secret-Key": {m.LiveSecret}})
	require.Equal(t, http.StatusNotFound, live.Status, "test-mode refunds are not the live key's")
}
