package worker

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/internal/testenv"
)

// TestHeldPaymentsAreSwept: a late payment (held for refund, never
// settled) is swept to the treasury by the sweep_payment job settle_pending
// enqueues, on an EVM chain and on Solana, and its address is marked swept.
func TestHeldPaymentsAreSwept(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base, chains.Solana}, Jobs: true, BlockTime: 100 * time.Millisecond})
	h := newHarness(t, env, agentpay.Config{})
	m, _ := h.merchant(t, "http://127.0.0.1:9/hook")
	auth := &agentpay.MerchantAuth{Merchant: m, Mode: agentpay.ModeTest}

	type held struct {
		chain   chains.Name
		address string
		session uuid.UUID
	}
	var all []held
	for _, chain := range []chains.Name{chains.Base, chains.Solana} {
		env.Fund(t, chain, env.Treasury.Address(chain), 1) // its token account exists
		amount := decimal.RequireFromString("5")
		created, err := h.svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
		require.NoError(t, err)
		sess := created.Session
		d, err := h.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", string(chain), "USDC")
		require.NoError(t, err)
		// Paid after the session expired: recorded by the scan as late.
		h.db.Ent.CheckoutSession.UpdateOne(sess).SetStatus(checkoutsession.StatusExpired).ExecX(ctx)
		env.Fund(t, chain, d.Address, 5_000_000)
		all = append(all, held{chain, d.Address, sess.ID})
	}
	h.runWorker(t)
	for _, w := range all {
		var p *ent.Payment
		require.Eventually(t, func() bool {
			var err error
			p, err = h.db.Ent.Payment.Query().Where(payment.SessionID(w.session)).Only(ctx)
			return err == nil && p.SweptAt != nil
		}, 90*time.Second, 100*time.Millisecond, "sweep on %s", w.chain)
		require.True(t, p.Late, w.chain)
		require.Nil(t, p.SettlementStatus, w.chain)
		da := h.db.Ent.DepositAddress.GetX(ctx, *p.DepositAddressID)
		require.True(t, da.Swept, w.chain)
		require.Equal(t, p.SweepTxHash, da.SweepTxHash, w.chain)
		require.Zero(t, env.Balance(t, w.chain, w.address).Int64(), w.chain)
		require.Equal(t, int64(5_000_001), env.Balance(t, w.chain, env.Treasury.Address(w.chain)).Int64(), w.chain)
	}
}
