package worker

import (
	"context"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// TestInternalPaymentTrustRecomputed: an internal payment whose volume
// crosses a trust step leaves the recompute of the payer's trust to a
// recompute_trust job (off the answer's path); the real worker runs it and
// the payer's score gains the step's points, which bound its later sends.
func TestInternalPaymentTrustRecomputed(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond})
	h := newHarness(t, env, agentpay.Config{AgentMode: agentpay.ModeTest, InternalSettlement: true})
	h.runWorker(t)
	name, email := "Shop", "shop@example.com"
	reg, err := h.svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	auth, err := h.svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	buyer, err := h.svc.QuickRegister(ctx, "trust_buyer")
	require.NoError(t, err)
	for _, w := range buyer.Wallets {
		if w.Chain == string(chains.Base) {
			env.Fund(t, chains.Base, w.Address, 5_000_000)
		}
	}
	// 9.50 USD sent: the next 1.00 crosses the 10 USD step.
	require.NoError(t, h.db.Ent.Agent.UpdateOneID(buyer.Agent.ID).SetVolumeSent(9_500_000).Exec(ctx))
	require.NoError(t, h.svc.RecomputeTrust(ctx, buyer.Agent.ID))
	agent := h.db.Ent.Agent.GetX(ctx, buyer.Agent.ID)
	before := agent.TrustScore

	amount := decimal.RequireFromString("1.00")
	created, err := h.svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &amount, Currency: "USD"})
	require.NoError(t, err)
	res, _, err := h.svc.PayCheckout(ctx, agent, agentpay.PayCheckoutRequest{ExternalID: created.Session.ExternalID})
	require.NoError(t, err)
	require.Equal(t, "confirmed", res.Status, res.Message)

	want := before + agentpay.TrustVolumeMaxPoints/5 // trustVolumeSteps: 10, 100, 1,000, 10,000 and 100,000 USD
	require.Eventually(t, func() bool {
		return h.db.Ent.Agent.GetX(ctx, agent.ID).TrustScore == want
	}, 30*time.Second, 20*time.Millisecond, "the worker recomputes the payer's trust")
	require.Equal(t, 1, testdb.CountRows(t, h.db, "river_job WHERE kind = 'recompute_trust'"), "one job, the payment's")
}
