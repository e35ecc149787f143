package rest

import (
	"context"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
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

// TestRefundAfterPayoutAttackOverREST replays the review's attack from
// outside: a merchant pays its own 12.00 session, waits for its payout,
// then refunds the payment to another address of its own. The refund is
// refused (422) with the amount available in detail, so the merchant's
// addresses end with what was paid in less the fee, never more, and the
// books balance.
func TestRefundAfterPayoutAttackOverREST(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, Jobs: true, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 1}})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{
		Settlement: agentpay.SettlementOptions{Wait: 10 * time.Second, BatchInterval: -1},
	}})
	payout, other := newEVMAddress(t), newEVMAddress(t)
	m := api.registerMerchant(map[string]any{"name": "Mallory", "email": "m@mallory.test",
		"settlement_address": payout, "settlement_chain": "base"})
	key := http.Header{"X-Checkout-Secret-Key": {m.TestSecret}}
	sess, _ := api.createSession(key, map[string]any{"amount": 12, "currency": "USD"})
	extID := sess.Session.ExternalID
	d, err := api.Svc.SelectPaymentMethod(ctx, extID, "", "base", "USDC")
	require.NoError(t, err)
	_, err = env.EVM(chains.Base).Send(ctx, common.HexToAddress(d.Address), big.NewInt(12_000_000))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := api.Svc.ScanDeposits(ctx, agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
		var got sessionEnvelope
		api.do(http.MethodGet, "/checkout/sessions/"+extID, nil, key).JSON(t, &got)
		return got.Session.Status == string(checkoutsession.StatusConfirmed)
	}, 20*time.Second, 100*time.Millisecond)

	// The payout (the worker's settle_payment job, run here).
	p := env.DB.Ent.Payment.Query().OnlyX(ctx)
	res, err := api.Svc.SettlePayment(ctx, p.ID)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	require.Equal(t, int64(11_988_000), env.Balance(t, chains.Base, payout).Int64(), "paid out, less the fee")

	path := "/checkout/sessions/" + extID + "/refunds"
	for _, body := range []map[string]any{{"address": other}, {"address": other, "amount_usd": 0.01}, {}} {
		resp := api.do(http.MethodPost, path, body, key)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		var e struct{ Detail string }
		resp.JSON(t, &e)
		require.Contains(t, e.Detail, "a refund after the payout is paid from what the merchant still holds unsettled on base (test mode): 0 USDC available", "%v", body)
	}
	list := api.do(http.MethodGet, path, nil, key)
	require.JSONEq(t, `{"data": []}`, string(list.Body), "nothing recorded")
	require.Zero(t, env.Balance(t, chains.Base, other).Sign())

	books, err := api.Svc.Books(ctx)
	require.NoError(t, err)
	require.NoError(t, books.Err())
}

// newEVMAddress is a fresh address no one else uses.
func newEVMAddress(t *testing.T) string {
	t.Helper()
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	return crypto.PubkeyToAddress(k.PublicKey).Hex()
}
