package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/settlementbatch"
	"agentpay/ent/webhookevent"
)

// batched settles with the defaults' shape: a minimum of 10.00 and an
// hour's interval.
var batched = SettlementOptions{Wait: 10 * time.Second, BatchMinimum: decimal.NewFromInt(10), BatchInterval: time.Hour}

// paidPayment opens a session of amount on base, pays it in full and
// confirms it; mining is paused meanwhile and resumed after.
func (f *settlementFixture) paidPayment(t *testing.T, amount string, units int64) *ent.Payment {
	t.Helper()
	f.stopMine()
	sess, addr := f.open(t, amount)
	f.pay(t, addr, units)
	f.mine(t, func() bool { return f.reload(t, sess).Status == checkoutsession.StatusConfirmed })
	f.stopMine = autoMine(t, f.evm)
	return f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).OnlyX(context.Background())
}

func (f *settlementFixture) settleWith(t *testing.T, p *ent.Payment, opts SettlementOptions) SettleResult {
	t.Helper()
	res, err := f.svc.settlePaymentWith(context.Background(), p.ID, opts)
	require.NoError(t, err)
	return res
}

// batchEvents are the merchant's settlement.completed events, oldest first.
func (f *settlementFixture) batchEvents(t *testing.T) []map[string]any {
	t.Helper()
	rows := f.db.Ent.WebhookEvent.Query().
		Where(webhookevent.EventType(EventSettlementCompleted)).
		Order(ent.Asc(webhookevent.FieldCreatedAt)).AllX(context.Background())
	var out []map[string]any
	for _, r := range rows {
		var body map[string]any
		require.NoError(t, json.Unmarshal(r.Payload, &body))
		out = append(out, body["data"].(map[string]any))
	}
	return out
}

func (f *settlementFixture) batches(t *testing.T) []*ent.SettlementBatch {
	t.Helper()
	return f.db.Ent.SettlementBatch.Query().Order(ent.Asc(settlementbatch.FieldSeq)).AllX(context.Background())
}

// Several small payments are swept one by one and paid out in one
// transfer once their net reaches the minimum.
func TestSettlementBatchPaysSmallPaymentsInOneTransfer(t *testing.T) {
	f := newSettlementFixture(t, nil)
	treasury := f.svc.cfg.Treasury.EVMAddress
	ps := []*ent.Payment{f.paidPayment(t, "1.50", 1_500_000), f.paidPayment(t, "2", 2_000_000), f.paidPayment(t, "3.25", 3_250_000)}

	// 1.50 + 2 + 3.25 = 6.75 gross, 6.74325 net: below the minimum.
	for _, p := range ps {
		res := f.settleWith(t, p, batched)
		require.False(t, res.Done)
		require.Contains(t, res.Waiting, "below the minimum 10")
	}
	require.Zero(t, f.balance(t, f.payee.Hex()), "nothing paid yet")
	require.Equal(t, int64(6_750_000), f.balance(t, treasury), "all swept")
	require.Empty(t, f.batches(t))

	// With the fixture's 7.25: 14.00 gross, 13.986 net.
	require.True(t, f.settleWith(t, f.payment, batched).Done)
	require.Equal(t, int64(13_986_000), f.balance(t, f.payee.Hex()), "every net, in one payout")
	require.Equal(t, int64(14_000), f.balance(t, treasury), "the fees")

	bs := f.batches(t)
	require.Len(t, bs, 1)
	b := bs[0]
	require.Equal(t, settlementbatch.StatusCompleted, b.Status)
	require.Equal(t, int64(14_000_000), b.Gross)
	require.Equal(t, int64(14_000), b.Fee)
	require.Equal(t, int64(13_986_000), b.Net)
	require.NotEmpty(t, b.TxHash)
	for _, p := range append(ps, f.payment) {
		p = f.db.Ent.Payment.GetX(context.Background(), p.ID)
		require.Equal(t, payment.SettlementStatusCompleted, *p.SettlementStatus)
		require.Equal(t, b.TxHash, p.SettlementTxHash, "one transfer for all")
		require.Equal(t, b.ID, *p.SettlementBatchID)
	}

	evs := f.batchEvents(t)
	require.Len(t, evs, 1)
	d := evs[0]
	require.Equal(t, b.ExternalID, d["settlement_id"])
	require.NotContains(t, d, "session_external_id", "four sessions")
	require.NotContains(t, d, "payment_external_id")
	requireDec(t, "14", d["gross_usd"])
	requireDec(t, "0.014", d["fee_usd"])
	requireDec(t, "13.986", d["net_usd"])
	requireDec(t, "0", d["refunds_usd"])
	require.Equal(t, b.TxHash, d["settlement_tx_hash"])
	lines := d["payments"].([]any)
	require.Len(t, lines, 4)
	byID := map[string]map[string]any{}
	for _, l := range lines {
		m := l.(map[string]any)
		byID[m["payment_external_id"].(string)] = m
	}
	l := byID[ps[2].ExternalID]
	requireDec(t, "3.25", l["gross_usd"])
	requireDec(t, "0.00325", l["fee_usd"])
	requireDec(t, "3.24675", l["net_usd"])
	require.NotEmpty(t, l["session_external_id"])

	// Nothing left: running again pays nothing more.
	require.True(t, f.settleWith(t, ps[0], batched).Done)
	require.Equal(t, int64(13_986_000), f.balance(t, f.payee.Hex()))
	require.Len(t, f.batchEvents(t), 1)
}

// Below the minimum, the batch is paid once its oldest payment has waited
// the interval.
func TestSettlementBatchIntervalPaysBelowMinimum(t *testing.T) {
	ctx := context.Background()
	f := newSettlementFixture(t, nil)
	res := f.settleWith(t, f.payment, batched)
	require.False(t, res.Done)
	require.Contains(t, res.Waiting, "below the minimum")

	// An hour later (swept_at is when the wait starts).
	f.db.Ent.Payment.UpdateOneID(f.payment.ID).SetSweptAt(time.Now().UTC().Add(-time.Hour - time.Minute)).ExecX(ctx)
	keys, err := f.svc.DueSettlements(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	out, err := f.svc.settleBatchWith(ctx, keys[0], batched)
	require.NoError(t, err)
	require.True(t, out.Done, out.Waiting)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()))
	d := f.batchEvents(t)[0]
	require.Equal(t, f.sess.ExternalID, d["session_external_id"], "one session: the per-payment fields")
	require.Equal(t, f.payment.ExternalID, d["payment_external_id"])
	requireDec(t, "7.24275", d["net_usd"])
}

// A refund after the payout is paid from the merchant's unsettled
// payments: reserved when it is made, netted off the batch that pays
// them, which waits while the refund is in flight; the merchant's balance
// ends exact to the base unit and the treasury advanced nothing.
func TestSettlementBatchNetsRefundAfterPayout(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	treasury := f.svc.cfg.Treasury.EVMAddress
	require.True(t, f.settle(t).Done)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()))

	_, err := f.refund(t, RefundInput{AmountUSD: usdAmount("2.5")})
	require.True(t, IsValidation(err), "nothing unsettled yet: %v", err)

	next := f.settlementFixture.paidPayment(t, "12", 12_000_000)
	payerBefore := f.balance(t, f.payer)
	out, err := f.refund(t, RefundInput{PaymentID: f.payment.ExternalID, AmountUSD: usdAmount("2.5")})
	require.NoError(t, err)
	require.True(t, out.Refund.AfterPayout)
	require.Equal(t, int64(2_500_000), out.Refund.ReservedToken)

	// The batch waits for the refund to complete.
	res := f.settleWith(t, next, atOnce)
	require.False(t, res.Done)
	require.Contains(t, res.Waiting, "waits for refund "+out.Refund.ExternalID)
	require.Empty(t, f.batches(t)[1:], "no second batch yet")

	f.send(t, out.Refund)
	require.Equal(t, payerBefore+2_500_000, f.balance(t, f.payer))
	p := f.reloadPayment(t)
	require.Equal(t, int64(7_242_750), *p.SettlementNet, "what was paid stays")

	require.True(t, f.settleWith(t, next, atOnce).Done)
	// 12 - 0.012 fee - 2.5 refund = 9.488
	require.Equal(t, int64(7_242_750+9_488_000), f.balance(t, f.payee.Hex()))
	// The treasury: 100 + 7.25 - 7.24275 + 12 - 2.5 - 9.488 = its start plus both fees.
	require.Equal(t, int64(100_000_000+7_250+12_000), f.balance(t, treasury))

	bs := f.batches(t)
	require.Len(t, bs, 2)
	require.Equal(t, int64(2_500_000), bs[1].RefundsNetted)
	require.Equal(t, int64(9_488_000), bs[1].Net)
	require.Zero(t, bs[1].CarriedOut)
	d := f.batchEvents(t)[1]
	requireDec(t, "2.5", d["refunds_usd"])
	requireDec(t, "9.488", d["net_usd"])
	rl := d["refunds"].([]any)
	require.Len(t, rl, 1)
	requireDec(t, "-2.5", rl[0].(map[string]any)["amount_usd"])
	require.Equal(t, out.Refund.ExternalID, rl[0].(map[string]any)["refund_id"])
	require.Equal(t, bs[1].ID, *f.db.Ent.Refund.GetX(ctx, out.Refund.ID).NettedBatchID)
	requireBalanced(t, f.env, f.svc)
}

// A reservation larger than the next batch's net (the batch claims only
// the payments swept so far): that batch pays nothing and carries the
// deficit into the one after, which pays the payment backing it; never a
// negative payout, never an unbacked deficit.
func TestSettlementBatchCarriesDeficitOver(t *testing.T) {
	f := newRefundFixture(t)
	require.True(t, f.settle(t).Done)
	small := f.settlementFixture.paidPayment(t, "3", 3_000_000)
	big := f.settlementFixture.paidPayment(t, "10", 10_000_000)
	// All 7.25 back, after the payout: 2.997 + 9.99 unsettled back it.
	out, err := f.refund(t, RefundInput{PaymentID: f.payment.ExternalID})
	require.NoError(t, err)
	require.Equal(t, int64(7_250_000), out.Refund.ReservedToken)
	f.send(t, out.Refund)

	require.True(t, f.settleWith(t, small, atOnce).Done, "big is not swept yet: the batch takes small alone")
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()), "nothing paid")
	bs := f.batches(t)
	require.Len(t, bs, 2)
	require.Zero(t, bs[1].Net)
	require.Empty(t, bs[1].TxHash, "no transfer")
	// 3 - 0.003 - 7.25 = -4.253
	require.Equal(t, int64(4_253_000), bs[1].CarriedOut)
	d := f.batchEvents(t)[1]
	requireDec(t, "0", d["net_usd"])
	requireDec(t, "4.253", d["carried_out_usd"])
	require.Equal(t, payment.SettlementStatusCompleted, *f.db.Ent.Payment.GetX(context.Background(), small.ID).SettlementStatus)

	// The deficit is counted against what is left: 9.99 - 4.253.
	require.NoError(t, f.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		u, err := readUnsettled(ctx, tx, SettlementKey{MerchantID: f.merchant.ID, Chain: "base"})
		require.Equal(t, int64(5_737_000), u.available())
		return err
	}))

	require.True(t, f.settleWith(t, big, atOnce).Done)
	// 10 - 0.01 - 4.253 carried = 5.737
	require.Equal(t, int64(7_242_750+5_737_000), f.balance(t, f.payee.Hex()))
	bs = f.batches(t)
	require.Len(t, bs, 3)
	require.Equal(t, int64(4_253_000), bs[2].CarriedIn)
	require.Zero(t, bs[2].CarriedOut)
	// Over the three batches the merchant got exactly what its payments
	// netted less the refund.
	require.Equal(t, int64(7_242_750+2_997_000+9_990_000-7_250_000), f.balance(t, f.payee.Hex()))
	requireBalanced(t, f.env, f.svc)
}

// Two runs settling the same merchant, chain and mode at once (two
// workers) form one batch and pay it once.
func TestSettlementBatchConcurrentRunsPayOnce(t *testing.T) {
	ctx := context.Background()
	f := newSettlementFixture(t, nil)
	other := f.paidPayment(t, "4", 4_000_000)
	notYet := batched
	notYet.BatchMinimum = decimal.NewFromInt(100)
	for _, p := range []*ent.Payment{f.payment, other} {
		require.False(t, f.settleWith(t, p, notYet).Done, "swept, not due")
	}
	key := SettlementKey{MerchantID: f.merchant.ID, Chain: "base"}
	var wg sync.WaitGroup
	results := make([]SettleResult, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = f.svc.settleBatchWith(ctx, key, atOnce) })
	}
	wg.Wait()
	for i := range errs {
		require.NoError(t, errs[i])
	}
	// The loser may have found the batch being paid; a later run finishes.
	for range 3 {
		if res, err := f.svc.settleBatchWith(ctx, key, atOnce); err == nil && res.Done && len(f.batchEvents(t)) == 1 {
			break
		}
	}
	require.Equal(t, int64(7_242_750+3_996_000), f.balance(t, f.payee.Hex()), "paid once")
	require.Equal(t, int64(7_250+4_000), f.balance(t, f.svc.cfg.Treasury.EVMAddress))
	require.Len(t, f.batches(t), 1)
	require.Len(t, f.batchEvents(t), 1)
}

// A held payment (late) is swept and held until refunded; with the
// merchant's settle_held_payments on, it is paid in the next batch.
func TestSettlementBatchSettlesHeldPaymentsWhenOn(t *testing.T) {
	ctx := context.Background()
	f := newSettlementFixture(t, nil)
	require.True(t, f.settle(t).Done)

	f.stopMine()
	sess, addr := f.open(t, "5")
	f.pastDeadline(t, sess)
	_, err := f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	f.pay(t, addr, 6_000_000)
	f.finalAll(t)
	f.stopMine = autoMine(t, f.evm)
	late := f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).OnlyX(ctx)
	require.True(t, late.Late)
	res, err := f.svc.sweepHeldWith(ctx, late.ID, atOnce)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	key := SettlementKey{MerchantID: f.merchant.ID, Chain: "base"}

	// Off (the default): held.
	out, err := f.svc.settleBatchWith(ctx, key, atOnce)
	require.NoError(t, err)
	require.True(t, out.Done)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()))
	require.Nil(t, f.db.Ent.Payment.GetX(ctx, late.ID).SettlementStatus)
	keys, err := f.svc.DueSettlements(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, keys)

	// On: paid in the next batch, less its fee.
	f.db.Ent.Merchant.UpdateOneID(f.merchant.ID).SetSettleHeldPayments(true).ExecX(ctx)
	keys, err = f.svc.DueSettlements(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []SettlementKey{key}, keys)
	out, err = f.svc.settleBatchWith(ctx, key, atOnce)
	require.NoError(t, err)
	require.True(t, out.Done, out.Waiting)
	require.Equal(t, int64(7_242_750+5_994_000), f.balance(t, f.payee.Hex()))
	late = f.db.Ent.Payment.GetX(ctx, late.ID)
	require.Equal(t, payment.SettlementStatusCompleted, *late.SettlementStatus)
	require.Equal(t, int64(6_000), *late.SettlementFee)
	lines := f.batchEvents(t)[1]["payments"].([]any)
	require.Len(t, lines, 1)
	require.Equal(t, true, lines[0].(map[string]any)["late"])
}
