package agentpay

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/transfer"
	"agentpay/internal/testdb"
)

// TestInternalSettlementRule: a payment takes the internal path only when
// every condition holds; each one alone sends it on chain.
func TestInternalSettlementRule(t *testing.T) {
	ours := internalPayer{
		enabled: true, custodial: true, merchantOurs: true,
		payerMode: ModeTest, sessionMode: ModeTest, payerChain: chains.Base, sessionChain: chains.Base,
	}
	for _, c := range []struct {
		name string
		edit func(p *internalPayer)
		want bool
	}{
		{"our wallet pays our merchant, same mode and chain", func(*internalPayer) {}, true},
		{"live to live", func(p *internalPayer) { p.payerMode, p.sessionMode = ModeLive, ModeLive }, true},
		{"turned off", func(p *internalPayer) { p.enabled = false }, false},
		{"payer outside the service", func(p *internalPayer) { p.custodial = false }, false},
		{"payee outside the service", func(p *internalPayer) { p.merchantOurs = false }, false},
		{"test wallet, live session", func(p *internalPayer) { p.sessionMode = ModeLive }, false},
		{"live wallet, test session", func(p *internalPayer) { p.payerMode = ModeLive }, false},
		{"no mode", func(p *internalPayer) { p.payerMode, p.sessionMode = "", "" }, false},
		{"another chain", func(p *internalPayer) { p.sessionChain = chains.Solana }, false},
		{"no chain", func(p *internalPayer) { p.payerChain, p.sessionChain = "", "" }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ours
			c.edit(&p)
			require.Equal(t, c.want, internalSettlement(p))
		})
	}
}

func startInternalEnv(t *testing.T) *agentCheckoutEnv {
	t.Helper()
	e := startAgentCheckoutEnv(t)
	e.svc.cfg.InternalSettlement = true
	return e
}

// TestInternalPaymentSettles: an agent's payment of a session settles on
// the internal ledger: confirmed in the request, no chain transaction (the
// wallet, the deposit address and the treasury hold what they held), the
// three payment events with "tx_hash": null and the internal reference;
// the books balance; a refund before the payout returns to the payer's
// wallet; the settlement collects from the wallet and pays the merchant
// in its batch, and the books balance again to the base unit.
func TestInternalPaymentSettles(t *testing.T) {
	ctx := context.Background()
	e := startInternalEnv(t)
	payout := e.externalAddress(t, chains.Base)
	e.merchant = e.db.Ent.Merchant.UpdateOne(e.merchant).SetSettlementAddress(payout).SaveX(ctx)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "20")
	e.env.Fund(t, chains.Base, e.treasuryAddress(chains.Base), 5_000_000) // to refund from
	wallet := e.wallet(t, a, chains.Base)
	sess := e.session(t, "12.34", false)
	gasBefore := e.treasuryNative(t, chains.Base)

	res, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.Equal(t, "confirmed", res.Status, res.Message)
	// Not the backfill's kind: no internal payment predates it.
	require.Equal(t, transfer.KindInternalPayment, e.db.Ent.Transfer.GetX(ctx, res.Transfer.ID).Kind)
	require.Equal(t, transfer.StatusCompleted, res.Transfer.Status)
	ref := InternalRefPrefix + res.Transfer.ID.String()
	require.Equal(t, ref, res.Transfer.TxHash)
	require.Zero(t, res.Transfer.Fee)
	require.Equal(t, ref, res.Payment.TxHash)
	require.Equal(t, wallet, res.Payment.FromAddress)
	require.Equal(t, int64(12_340_000), res.Payment.AmountToken)
	require.Equal(t, checkoutsession.StatusConfirmed, res.Session.Status)
	require.Equal(t, payment.SettlementStatusPending, *res.Payment.SettlementStatus)

	// Nothing moved on chain, and the treasury paid no gas.
	nextBaseBlock(t, e.env)
	requireDecimal(t, "20", e.onChain(t, chains.Base, wallet))
	requireDecimal(t, "0", e.onChain(t, chains.Base, res.Transfer.ToAddress))
	requireDecimal(t, "5", e.onChain(t, chains.Base, e.treasuryAddress(chains.Base)))
	require.Zero(t, gasBefore.Cmp(e.treasuryNative(t, chains.Base)))

	// The events an on-chain payment sends, tx_hash null.
	f := &paymentFixture{checkoutFixture: &checkoutFixture{db: e.db}, merchant: e.merchant}
	evs := f.sessionEvents(t, sess)
	require.Equal(t, []string{EventPaymentDetected, EventPaymentConfirming, EventPaymentConfirmed}, eventTypes(evs))
	for _, ev := range evs {
		v, present := ev.Data["tx_hash"]
		require.True(t, present, "%s: tx_hash is present", ev.Type)
		require.Nil(t, v, "%s: tx_hash is null", ev.Type)
		require.Equal(t, ref, ev.Data["internal_reference"], ev.Type)
		require.Equal(t, wallet, ev.Data["from_address"], ev.Type)
		require.Equal(t, res.Payment.ExternalID, ev.Data["payment_external_id"], ev.Type)
	}

	// Spent: the wallet's 20 on chain are 7.66 available.
	_, _, err = e.svc.Send(ctx, a, SendRequest{ToUsername: e.register(t, "other").Username, AmountUSD: dec("7.67"), Chain: "base"})
	require.ErrorIs(t, err, ErrInsufficientFunds)
	requireBalanced(t, e.env, e.svc)

	// A refund before the payout returns to the payer's wallet.
	auth := &MerchantAuth{Merchant: e.merchant, Mode: ModeTest}
	amount := dec("2.34")
	r, err := e.svc.CreateRefund(ctx, auth, sess.ExternalID, RefundInput{AmountUSD: &amount})
	require.NoError(t, err)
	require.Equal(t, wallet, r.Refund.ToAddress)
	e.svc.cfg.Settlement.Wait = 10 * time.Second
	sent, err := e.svc.SendRefund(ctx, r.Refund.ID)
	require.NoError(t, err)
	require.True(t, sent.Done, sent.Waiting)
	requireBalanced(t, e.env, e.svc)
	created := findEvent(t, f.sessionEvents(t, sess), EventRefundCreated)
	v, present := created.Data["payment_tx_hash"]
	require.True(t, present)
	require.Nil(t, v, "the payment has no chain transaction")
	require.Equal(t, ref, created.Data["payment_internal_reference"])

	// The settlement collects the payment from the wallet and pays the
	// merchant what is left, less the fee, in its batch.
	done, err := e.svc.settlePaymentWith(ctx, res.Payment.ID, atOnce)
	require.NoError(t, err)
	require.True(t, done.Done, done.Waiting)
	p := e.db.Ent.Payment.GetX(ctx, res.Payment.ID)
	require.NotNil(t, p.SweptAt)
	require.NotEmpty(t, p.SweepTxHash)
	require.Equal(t, payment.SettlementStatusCompleted, *p.SettlementStatus)
	b := requireBalanced(t, e.env, e.svc)
	fee := TransferFee(10_000_000)
	requireDecimal(t, "10", e.onChain(t, chains.Base, wallet), "20 - 12.34 collected + 2.34 refunded")
	require.Zero(t, e.ledgerUnits(t, payout).Cmp(big.NewInt(10_000_000-fee)), "the merchant's payout: 10 less the fee")
	require.Zero(t, booksLine(t, b, chains.Base, ModeTest, BooksTreasury).OnChain.Cmp(big.NewInt(5_000_000+fee)), "the treasury kept the fee")
}

// ledgerUnits is address's USDC on base in base units.
func (e *agentCheckoutEnv) ledgerUnits(t *testing.T, address string) *big.Int {
	t.Helper()
	n, err := e.env.Ledger(chains.Base).Balance(context.Background(), address)
	require.NoError(t, err)
	return n
}

// TestInternalPaymentOneBaseUnit: a price of 0.000001 USDC is paid and
// confirmed internally, no fee and no gas exceeding it (none at all).
func TestInternalPaymentOneBaseUnit(t *testing.T) {
	ctx := context.Background()
	e := startInternalEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "1")
	sess := e.session(t, "0.000001", false)
	gasBefore := e.treasuryNative(t, chains.Base)

	res, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.Equal(t, "confirmed", res.Status, res.Message)
	require.Equal(t, int64(1), res.Payment.AmountToken)
	require.Zero(t, res.Transfer.Fee)
	p := e.db.Ent.Payment.GetX(ctx, res.Payment.ID)
	require.Zero(t, *p.SettlementFee, "0.1% of one base unit rounds to nothing")
	require.Equal(t, int64(1), *p.SettlementNet)
	require.Zero(t, e.db.Ent.DustDeposit.Query().CountX(ctx), "an internal payment is never dust")
	nextBaseBlock(t, e.env)
	require.Zero(t, gasBefore.Cmp(e.treasuryNative(t, chains.Base)), "no gas")
	requireDecimal(t, "1", e.onChain(t, chains.Base, e.wallet(t, a, chains.Base)))
	requireBalanced(t, e.env, e.svc)
}

// TestInternalPaymentsNeverOverdraw: many internal payments from one
// wallet at once, more than it holds: exactly as many as it covers pass
// (the no-overdraft rule under the wallet lock), the rest are refused and
// change nothing.
func TestInternalPaymentsNeverOverdraw(t *testing.T) {
	ctx := context.Background()
	e := startInternalEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "2")
	const n = 7
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		sess := e.session(t, "0.5", false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
		}()
	}
	wg.Wait()
	paid := 0
	for _, err := range errs {
		if err == nil {
			paid++
			continue
		}
		require.ErrorIs(t, err, ErrInsufficientFunds)
	}
	require.Equal(t, 4, paid, "2 USDC pays four 0.50 sessions")
	require.Equal(t, 4, e.db.Ent.Payment.Query().Where(payment.StatusEQ(payment.StatusConfirmed)).CountX(ctx))
	require.Equal(t, 4, e.db.Ent.Transfer.Query().CountX(ctx))
	requireBalanced(t, e.env, e.svc)
}

// TestInternalPaymentIdempotent: the same Idempotency-Key again answers
// the one payment, replayed.
func TestInternalPaymentIdempotent(t *testing.T) {
	ctx := context.Background()
	e := startInternalEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "10")
	sess := e.session(t, "2.5", false)
	key := "order-internal"
	first, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Transfer.ID, again.Transfer.ID)
	require.Equal(t, first.Payment.ID, again.Payment.ID)
	require.Equal(t, "confirmed", again.Status)
	require.Equal(t, 1, e.db.Ent.Transfer.Query().CountX(ctx))
	require.Equal(t, 1, e.db.Ent.Payment.Query().CountX(ctx))
}

// TestInternalPaymentQueuesTrustRecompute: an internal payment whose volume
// crosses a trust step answers without recomputing the payer's trust (off
// the answer's path) and queues a recompute_trust job for it in its own
// transaction; one that moves no score queues nothing. The job's run
// (RecomputeTrust, which the worker calls: worker's
// TestInternalPaymentTrustRecomputed) stores the step's points.
func TestInternalPaymentQueuesTrustRecompute(t *testing.T) {
	ctx := context.Background()
	e := startInternalEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "5")
	// 9.50 USD sent: the next 1.00 crosses the 10 USD step.
	require.NoError(t, e.db.Ent.Agent.UpdateOneID(a.ID).SetVolumeSent(9_500_000).Exec(ctx))
	require.NoError(t, e.svc.RecomputeTrust(ctx, a.ID))
	a = e.db.Ent.Agent.GetX(ctx, a.ID)
	before := a.TrustScore
	jobsFor := func() int {
		t.Helper()
		return testdb.CountRows(t, e.db, "river_job WHERE kind = 'recompute_trust' AND CAST(args AS TEXT) LIKE '%"+a.ID.String()+"%'")
	}

	res, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: e.session(t, "1.00", false).ExternalID})
	require.NoError(t, err)
	require.Equal(t, "confirmed", res.Status, res.Message)
	stored := e.db.Ent.Agent.GetX(ctx, a.ID)
	require.Equal(t, int64(10_500_000), stored.VolumeSent)
	require.Equal(t, before, stored.TrustScore, "not recomputed in the answer's path")
	require.True(t, trustStale(stored, e.svc.now()))
	require.Equal(t, 1, jobsFor(), "the recompute is queued with the payment")

	require.NoError(t, e.svc.RecomputeTrust(ctx, a.ID)) // what the job runs
	stored = e.db.Ent.Agent.GetX(ctx, a.ID)
	require.Equal(t, before+TrustVolumeMaxPoints/len(trustVolumeSteps), stored.TrustScore)
	require.False(t, trustStale(stored, e.svc.now()))

	_, _, err = e.svc.PayCheckout(ctx, stored, PayCheckoutRequest{ExternalID: e.session(t, "1.00", false).ExternalID})
	require.NoError(t, err)
	require.Equal(t, 1, jobsFor(), "11.50 USD crosses no step: nothing to recompute, no job")
}
