package agentpay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/merchantkey"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
)

// refundFixture is the settlement fixture (a confirmed 7.25 payment on
// base, settlement pending) with a treasury that holds 100 USDC to refund
// from.
type refundFixture struct {
	*settlementFixture
	auth  *MerchantAuth
	payer string
}

func newRefundFixture(t *testing.T) *refundFixture {
	t.Helper()
	f := &refundFixture{settlementFixture: newSettlementFixture(t, nil)}
	// From the faucet, which records it: the books explain it.
	f.env.Fund(t, chains.Base, f.svc.cfg.Treasury.EVMAddress, 100_000_000)
	f.auth = &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}
	f.payer = f.payment.FromAddress
	require.NotEmpty(t, f.payer)
	return f
}

func (f *refundFixture) refund(t *testing.T, in RefundInput) (*CreatedRefund, error) {
	t.Helper()
	return f.svc.CreateRefund(context.Background(), f.auth, f.sess.ExternalID, in)
}

func (f *refundFixture) send(t *testing.T, r *ent.Refund) *ent.Refund {
	t.Helper()
	f.svc.cfg.Settlement.Wait = 10 * time.Second
	res, err := f.svc.SendRefund(context.Background(), r.ID)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	got, err := f.db.Ent.Refund.Get(context.Background(), r.ID)
	require.NoError(t, err)
	return got
}

// refundOf refunds payment p of any of the fixture merchant's sessions.
func (f *refundFixture) refundOf(t *testing.T, p *ent.Payment, in RefundInput) (*CreatedRefund, error) {
	t.Helper()
	sess := f.db.Ent.CheckoutSession.GetX(context.Background(), p.SessionID)
	in.PaymentID = p.ExternalID
	return f.svc.CreateRefund(context.Background(), f.auth, sess.ExternalID, in)
}

func usdAmount(s string) *decimal.Decimal {
	d := decimal.RequireFromString(s)
	return &d
}

// A partial refund of a payment whose settlement is pending goes to the
// payer out of the treasury, and the merchant is paid what is left less
// the fee on what is left.
func TestRefundPartialBeforePayout(t *testing.T) {
	f := newRefundFixture(t)
	obs := newRecordingObserver()
	f.svc.cfg.Observer = obs
	treasury := f.svc.cfg.Treasury.EVMAddress
	payerBefore := f.balance(t, f.payer)

	out, err := f.refund(t, RefundInput{AmountUSD: usdAmount("2.25"), Reason: "one item out of stock"})
	require.NoError(t, err)
	r := out.Refund
	require.Equal(t, refund.StatusPending, r.Status)
	require.Equal(t, int64(2_250_000), r.AmountToken)
	require.Equal(t, f.payer, r.ToAddress)
	require.Regexp(t, `^re_[0-9A-Za-z]{24}$`, r.ExternalID)

	p := f.reloadPayment(t)
	require.Equal(t, int64(2_250_000), p.RefundedToken)
	require.Equal(t, int64(5_000), *p.SettlementFee, "the fee follows what is left")
	require.Equal(t, int64(4_995_000), *p.SettlementNet)

	r = f.send(t, r)
	require.Equal(t, refund.StatusCompleted, r.Status)
	require.NotEmpty(t, r.TxHash)
	require.NotNil(t, r.CompletedAt)
	require.Equal(t, payerBefore+2_250_000, f.balance(t, f.payer))
	require.Equal(t, int64(100_000_000-2_250_000), f.balance(t, treasury))

	// Sending again moves nothing, and reports nothing again.
	r = f.send(t, r)
	require.Equal(t, payerBefore+2_250_000, f.balance(t, f.payer))
	obs.mu.Lock()
	require.Equal(t, []string{"test/base/2.25"}, obs.refunds)
	require.Len(t, obs.gas["test/base"], 1, "the refund's gas")
	obs.mu.Unlock()

	require.True(t, f.settle(t).Done)
	require.Equal(t, int64(4_995_000), f.balance(t, f.payee.Hex()), "merchant paid what is left, less its fee")
	require.Equal(t, int64(100_000_000-2_250_000+7_250_000-4_995_000), f.balance(t, treasury))

	evs := f.sessionEvents(t, f.sess)
	created := findEvent(t, evs, EventRefundCreated)
	requireDec(t, "2.25", created.Data["amount_usd"])
	require.Equal(t, r.ExternalID, created.Data["refund_id"])
	require.Equal(t, "pending", created.Data["refund_status"])
	require.Equal(t, p.ExternalID, created.Data["payment_external_id"])
	require.Equal(t, "one item out of stock", created.Data["reason"])
	completed := findEvent(t, evs, EventRefundCompleted)
	require.Equal(t, r.TxHash, completed.Data["tx_hash"])
	require.Equal(t, "completed", completed.Data["refund_status"])
	requireDec(t, "4.995", findEvent(t, evs, EventSettlementCompleted).Data["net_usd"])

	list, err := f.svc.ListRefunds(context.Background(), f.auth, f.sess.ExternalID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, r.ExternalID, list[0].ExternalID)
}

// Refunded in full before its payout, the payment settles with nothing to
// pay: the sweep repays the treasury, which paid the refund.
func TestRefundInFullSettlesWithoutPayout(t *testing.T) {
	f := newRefundFixture(t)
	out, err := f.refund(t, RefundInput{})
	require.NoError(t, err)
	require.Equal(t, int64(7_250_000), out.Refund.AmountToken, "no amount: all that is left")
	f.send(t, out.Refund)

	require.True(t, f.settle(t).Done)
	p := f.reloadPayment(t)
	require.Equal(t, payment.SettlementStatusCompleted, *p.SettlementStatus)
	require.Zero(t, *p.SettlementNet)
	require.Zero(t, *p.SettlementFee)
	require.Empty(t, p.SettlementTxHash, "no payout")
	require.Zero(t, f.balance(t, f.payee.Hex()))
	require.Equal(t, int64(100_000_000), f.balance(t, f.svc.cfg.Treasury.EVMAddress))

	_, err = f.refund(t, RefundInput{AmountUSD: usdAmount("0.01")})
	require.Error(t, err)
}

// What a refund refuses, and that a refusal changes nothing.
func TestRefundRefusals(t *testing.T) {
	f := newRefundFixture(t)
	other := &MerchantAuth{Merchant: f.merchant, Mode: ModeLive}
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	cases := []struct {
		name string
		auth *MerchantAuth
		in   RefundInput
		want error
	}{
		{"more than paid", f.auth, RefundInput{AmountUSD: usdAmount("7.250001")}, nil},
		{"more precise than the token", f.auth, RefundInput{AmountUSD: usdAmount("1.0000001")}, nil},
		{"zero", f.auth, RefundInput{AmountUSD: usdAmount("0")}, nil},
		{"negative", f.auth, RefundInput{AmountUSD: usdAmount("-1")}, nil},
		{"not an address on base", f.auth, RefundInput{Address: "So1anaAddre55"}, nil},
		{"a long reason", f.auth, RefundInput{Reason: string(make([]byte, RefundReasonMaxBytes+1))}, nil},
		{"unknown payment", f.auth, RefundInput{PaymentID: "pay_unknown"}, ErrNotFound},
		{"the session in the other mode", other, RefundInput{}, ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.svc.CreateRefund(context.Background(), c.auth, f.sess.ExternalID, c.in)
			require.Error(t, err)
			if c.want != nil {
				require.ErrorIs(t, err, c.want)
			} else {
				require.True(t, IsValidation(err), "%v", err)
			}
		})
	}
	require.Zero(t, f.db.Ent.Refund.Query().CountX(context.Background()))
	require.Zero(t, f.reloadPayment(t).RefundedToken)

	// To an address the merchant gives (with its secret key).
	to := crypto.PubkeyToAddress(key.PublicKey).Hex()
	out, err := f.refund(t, RefundInput{AmountUSD: usdAmount("1"), Address: to})
	require.NoError(t, err)
	require.Equal(t, refund.DestinationChosen, out.Refund.Destination)
	f.send(t, out.Refund)
	require.Equal(t, int64(1_000_000), f.balance(t, to))

	// After the payout, still bounded by what is left, and paid only from
	// what the merchant holds unsettled: nothing yet
	// (TestRefundAfterPayoutComesFromUnsettledMoney).
	require.True(t, f.settle(t).Done)
	_, err = f.refund(t, RefundInput{AmountUSD: usdAmount("6.250001")})
	require.True(t, IsValidation(err), "%v", err)
	_, err = f.refund(t, RefundInput{AmountUSD: usdAmount("1")})
	require.True(t, IsValidation(err), "%v", err)
	require.ErrorContains(t, err, "0 USDC available")
	f.paidPayment(t, "2", 2_000_000) // 1.998 unsettled
	out, err = f.refund(t, RefundInput{PaymentID: f.payment.ExternalID, AmountUSD: usdAmount("1")})
	require.NoError(t, err)
	require.True(t, out.Refund.AfterPayout)
	require.Equal(t, int64(1_000_000), out.Refund.ReservedToken)
}

// The same Idempotency-Key answers the same refund; another request under
// it is refused.
func TestRefundIdempotencyKey(t *testing.T) {
	f := newRefundFixture(t)
	in := RefundInput{AmountUSD: usdAmount("1.5"), IdempotencyKey: "refund-order-17"}
	first, err := f.refund(t, in)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	again, err := f.refund(t, in)
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.Refund.ID, again.Refund.ID)

	in.AmountUSD = usdAmount("2")
	_, err = f.refund(t, in)
	require.ErrorIs(t, err, ErrIdempotencyKeyReused)
	require.Equal(t, int64(1_500_000), f.reloadPayment(t).RefundedToken)
	require.Equal(t, 1, f.db.Ent.Refund.Query().CountX(context.Background()))
}

// Concurrent refunds never take more than was paid: of eight refunds of
// 1.00 against 7.25, seven are recorded.
func TestRefundConcurrentNeverExceedsPaid(t *testing.T) {
	f := newRefundFixture(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = f.svc.CreateRefund(context.Background(), f.auth, f.sess.ExternalID, RefundInput{AmountUSD: usdAmount("1")})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case IsValidation(err), errors.Is(err, ErrConflict):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 7, ok)
	p := f.reloadPayment(t)
	require.Equal(t, int64(7_000_000), p.RefundedToken)
	require.Equal(t, 7, f.db.Ent.Refund.Query().CountX(context.Background()))
	require.Equal(t, int64(250_000-TransferFee(250_000)), *p.SettlementNet)
}

// A late payment (held for refund, never settled) is refunded in full.
func TestRefundLatePayment(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	sess, addr := f.open(t, "5")
	f.pastDeadline(t, sess)
	_, err := f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	f.pay(t, addr, 6_000_000)
	f.stopMine()
	f.finalAll(t)
	p := f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).OnlyX(ctx)
	require.True(t, p.Late)
	require.Nil(t, p.SettlementStatus)

	out, err := f.svc.CreateRefund(ctx, f.auth, sess.ExternalID, RefundInput{})
	require.NoError(t, err)
	require.Equal(t, int64(6_000_000), out.Refund.AmountToken)
	autoMine(t, f.evm)
	f.send(t, out.Refund)
}

// A refund whose transfer the chain reverted MaxRefundReverts times fails:
// refund.failed, and its amount is refundable again and back in the
// pending payout. (The devnet token has no blocklist that would make a
// transfer revert, so the reverts are told to the refund as SendRefund
// tells them when it reads a failed receipt.)
func TestRefundFailsAfterReverts(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	out, err := f.refund(t, RefundInput{AmountUSD: usdAmount("3")})
	require.NoError(t, err)
	require.Equal(t, int64(4_250_000-TransferFee(4_250_000)), *f.reloadPayment(t).SettlementNet)

	r := out.Refund
	for i := 1; i <= MaxRefundReverts; i++ {
		hash := fmt.Sprintf("0x%064x", i)
		f.db.Ent.Refund.UpdateOneID(r.ID).SetTxHash(hash).SetStatus(refund.StatusSubmitted).ExecX(ctx)
		r = f.db.Ent.Refund.GetX(ctx, r.ID)
		r, err = f.svc.refundReverted(ctx, r, "execution reverted")
		require.NoError(t, err)
		require.Equal(t, i, r.Reverts)
		if i < MaxRefundReverts {
			require.Equal(t, refund.StatusSubmitted, r.Status, "retried after revert %d", i)
			require.Empty(t, r.TxHash)
		}
	}
	require.Equal(t, refund.StatusFailed, r.Status)
	p := f.reloadPayment(t)
	require.Zero(t, p.RefundedToken, "refundable again")
	require.Equal(t, int64(7_250_000-7_250), *p.SettlementNet, "back in the payout")
	failed := findEvent(t, f.sessionEvents(t, f.sess), EventRefundFailed)
	require.Equal(t, "execution reverted", failed.Data["failure_reason"])
	require.Equal(t, "failed", failed.Data["refund_status"])

	// Failed is final: a later revert report changes nothing.
	again, err := f.svc.refundReverted(ctx, r, "execution reverted")
	require.NoError(t, err)
	require.Equal(t, refund.StatusFailed, again.Status)
	require.Zero(t, f.reloadPayment(t).RefundedToken)
}

// The review's attack, in process: a merchant pays its own session, waits
// for its payout and refunds the payment to another address of its own.
// After the payout a refund is paid only from what the merchant still
// holds unsettled on the chain and mode, reserved at once: refused while
// there is none (the detail says what is available), up to it once there
// is; a refund before the payout of a payment backing a reservation is
// refused too; a reservation whose refund fails is released. The treasury
// never advances anything, and the books balance.
func TestRefundAfterPayoutComesFromUnsettledMoney(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	own := crypto.PubkeyToAddress(key.PublicKey).Hex()
	require.True(t, f.settle(t).Done)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()), "paid out")

	refuse := func(in RefundInput, available string) {
		t.Helper()
		_, err := f.refund(t, in)
		require.True(t, IsValidation(err), "%v", err)
		require.ErrorContains(t, err, available+" USDC available")
	}
	all := RefundInput{PaymentID: f.payment.ExternalID, Address: own}
	refuse(all, "0")
	require.Zero(t, f.reloadPayment(t).RefundedToken, "a refusal changes nothing")
	require.Zero(t, f.db.Ent.Refund.Query().CountX(ctx))

	q := f.paidPayment(t, "4", 4_000_000) // net 3.996, unsettled
	refuse(all, "3.996")
	first, err := f.refund(t, RefundInput{PaymentID: f.payment.ExternalID, Address: own, AmountUSD: usdAmount("3.996")})
	require.NoError(t, err)
	require.Equal(t, int64(3_996_000), first.Refund.ReservedToken)
	refuse(RefundInput{PaymentID: f.payment.ExternalID, AmountUSD: usdAmount("0.000001")}, "0")

	// q backs the reservation: refunding it before its payout would leave
	// the reservation unbacked.
	_, err = f.refundOf(t, q, RefundInput{AmountUSD: usdAmount("0.01")})
	require.True(t, IsValidation(err), "%v", err)
	require.ErrorContains(t, err, "backs refunds made after a payout")

	// The reserved refund fails: its reservation is released.
	r := first.Refund
	for i := 1; i <= MaxRefundReverts; i++ {
		f.db.Ent.Refund.UpdateOneID(r.ID).SetTxHash(fmt.Sprintf("0x%064x", i)).SetStatus(refund.StatusSubmitted).ExecX(ctx)
		r, err = f.svc.refundReverted(ctx, f.db.Ent.Refund.GetX(ctx, r.ID), "execution reverted")
		require.NoError(t, err)
	}
	require.Equal(t, refund.StatusFailed, r.Status)
	out, err := f.refundOf(t, q, RefundInput{AmountUSD: usdAmount("1")})
	require.NoError(t, err, "nothing reserved any more")
	require.False(t, out.Refund.AfterPayout)
	require.Zero(t, out.Refund.ReservedToken)
	f.send(t, out.Refund)
	// q: 3 left, net 2.997.
	second, err := f.refund(t, RefundInput{PaymentID: f.payment.ExternalID, Address: own, AmountUSD: usdAmount("2.997")})
	require.NoError(t, err)
	f.send(t, second.Refund)
	require.Equal(t, int64(2_997_000), f.balance(t, own))

	require.True(t, f.settleWith(t, q, atOnce).Done)
	require.Equal(t, int64(7_242_750), f.balance(t, f.payee.Hex()), "q's net went to the refund")
	bs := f.batches(t)
	require.Len(t, bs, 2)
	require.Zero(t, bs[1].Net)
	require.Zero(t, bs[1].CarriedOut, "no deficit")
	require.Equal(t, int64(2_997_000), bs[1].RefundsNetted)
	// The treasury holds its 100, the two fees and nothing else.
	require.Equal(t, int64(100_000_000+7_250+3_000), f.balance(t, f.svc.cfg.Treasury.EVMAddress))
	requireBalanced(t, f.env, f.svc)
}

// What a payout did not pay of a payment (a refund before it that failed
// afterwards) covers a later refund of it first; only the rest needs the
// merchant's unsettled money.
func TestRefundAfterPayoutUsesThePaymentsUnpaidMoneyFirst(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	out, err := f.refund(t, RefundInput{AmountUSD: usdAmount("2")})
	require.NoError(t, err)
	require.True(t, f.settle(t).Done)
	require.Equal(t, int64(5_244_750), f.balance(t, f.payee.Hex()), "5.25 less its fee")
	r := out.Refund
	for i := 1; i <= MaxRefundReverts; i++ {
		f.db.Ent.Refund.UpdateOneID(r.ID).SetTxHash(fmt.Sprintf("0x%064x", i)).SetStatus(refund.StatusSubmitted).ExecX(ctx)
		r, err = f.svc.refundReverted(ctx, f.db.Ent.Refund.GetX(ctx, r.ID), "execution reverted")
		require.NoError(t, err)
	}
	require.Equal(t, refund.StatusFailed, r.Status)
	require.Zero(t, f.reloadPayment(t).RefundedToken)

	again, err := f.refund(t, RefundInput{AmountUSD: usdAmount("2")})
	require.NoError(t, err)
	require.True(t, again.Refund.AfterPayout)
	require.Zero(t, again.Refund.ReservedToken, "the 2 the payout kept pays it")
	_, err = f.refund(t, RefundInput{AmountUSD: usdAmount("0.01")})
	require.ErrorContains(t, err, "0 USDC available")
	f.send(t, again.Refund)
	requireBalanced(t, f.env, f.svc)
}

// A refund goes to the payer unless the merchant's secret key names
// another address; a dashboard session (an owner's too) refunds to the
// payer only, a read-only member not at all. The refund records whether
// its destination was chosen and the credential that asked.
func TestRefundDestinationNeedsTheSecretKey(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	// As AuthenticateMerchant makes it from the merchant's test secret key.
	secret := &MerchantAuth{Merchant: f.merchant, Mode: ModeTest, keyMatch: merchantkey.And(
		merchantkey.MerchantID(f.merchant.ID), merchantkey.KindEQ(merchantkey.KindTest), merchantkey.RevokedAtIsNil())}
	keyID := f.db.Ent.MerchantKey.Query().Where(secret.keyMatch).OnlyIDX(ctx)
	userID := uuid.New()
	owner := &MerchantAuth{Merchant: f.merchant, Mode: ModeTest, Dashboard: &DashboardCaller{UserID: userID, Role: RoleOwner}}
	readOnly := &MerchantAuth{Merchant: f.merchant, Mode: ModeTest, Dashboard: &DashboardCaller{UserID: userID, Role: RoleReadOnly}}
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	other := crypto.PubkeyToAddress(key.PublicKey).Hex()
	one := usdAmount("0.5")

	cases := []struct {
		name    string
		auth    *MerchantAuth
		address string
		want    error // nil: recorded
		dest    refund.Destination
		with    refund.RequestedWith
	}{
		{"read-only member, to the payer", readOnly, "", ErrReadOnlyMember, "", ""},
		{"owner's dashboard session, to another address", owner, other, ErrForbidden, "", ""},
		{"owner's dashboard session, to the payer", owner, "", nil, refund.DestinationPayer, refund.RequestedWithDashboardSession},
		{"owner's dashboard session, naming the payer", owner, strings.ToLower(f.payer), nil, refund.DestinationPayer, refund.RequestedWithDashboardSession},
		{"secret key, to another address", secret, other, nil, refund.DestinationChosen, refund.RequestedWithSecretKey},
		{"secret key, to the payer", secret, "", nil, refund.DestinationPayer, refund.RequestedWithSecretKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.reloadPayment(t).RefundedToken
			out, err := f.svc.CreateRefund(ctx, c.auth, f.sess.ExternalID, RefundInput{AmountUSD: one, Address: c.address})
			if c.want != nil {
				require.ErrorIs(t, err, c.want)
				require.Equal(t, before, f.reloadPayment(t).RefundedToken, "a refusal changes nothing")
				return
			}
			require.NoError(t, err)
			r := out.Refund
			require.Equal(t, c.dest, r.Destination)
			require.Equal(t, c.with, *r.RequestedWith)
			if c.dest == refund.DestinationPayer {
				require.Equal(t, f.payer, r.ToAddress)
			} else {
				require.Equal(t, other, r.ToAddress)
			}
			if c.with == refund.RequestedWithDashboardSession {
				require.Equal(t, userID, *r.DashboardUserID)
				require.Nil(t, r.MerchantKeyID)
			} else {
				require.Nil(t, r.DashboardUserID)
				require.Equal(t, keyID, *r.MerchantKeyID)
			}
		})
	}
}

// Refunds after a payout made at once, and a batch formed at the same
// time, never use the same unsettled money: the reservations never exceed
// the unsettled nets, each is netted by exactly one batch, no batch
// carries a deficit, the merchant ends paid exactly its nets less the
// refunds and the treasury exactly its fees.
func TestRefundReservationsHoldUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	treasury := f.svc.cfg.Treasury.EVMAddress
	require.True(t, f.settle(t).Done)
	q := f.paidPayment(t, "4", 4_000_000) // net 3.996
	res := f.settleWith(t, q, batched)    // swept, below the minimum: a batch may take it now
	require.False(t, res.Done)
	key := SettlementKey{MerchantID: f.merchant.ID, Chain: "base"}

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = f.svc.CreateRefund(ctx, f.auth, f.sess.ExternalID, RefundInput{AmountUSD: usdAmount("1")})
		})
	}
	var batchErr error
	wg.Go(func() { _, batchErr = f.svc.settleBatchWith(ctx, key, atOnce) })
	wg.Wait()
	require.NoError(t, batchErr)
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case IsValidation(err):
			require.ErrorContains(t, err, "USDC available")
		case errors.Is(err, ErrConflict):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.LessOrEqual(t, ok, 3, "3.996 unsettled backs at most three refunds of 1")
	t.Logf("%d refunds recorded; the batch came %s", ok, map[bool]string{true: "first", false: "after them, or waits"}[ok == 0])

	rs := f.db.Ent.Refund.Query().AllX(ctx)
	require.Len(t, rs, ok)
	var reserved int64
	for _, r := range rs {
		require.True(t, r.AfterPayout)
		reserved += r.ReservedToken
		f.send(t, r)
	}
	require.LessOrEqual(t, reserved, int64(3_996_000))
	out, err := f.svc.settleBatchWith(ctx, key, atOnce)
	require.NoError(t, err)
	require.True(t, out.Done, out.Waiting)

	var netted, paid int64
	for _, b := range f.batches(t) {
		require.Zero(t, b.CarriedOut, "batch %d carries no deficit", b.Seq)
		netted += b.RefundsNetted
		paid += b.Net
	}
	require.Equal(t, reserved, netted, "every reservation netted once")
	require.Equal(t, int64(7_242_750+3_996_000)-reserved, paid)
	require.Equal(t, paid, f.balance(t, f.payee.Hex()))
	require.Equal(t, int64(100_000_000+7_250+4_000), f.balance(t, treasury), "the treasury advanced nothing")
	requireBalanced(t, f.env, f.svc)
}

// A payment is refundable once confirmed, before its session is (an
// underpayment waiting for the rest): refunded then, it is settled on what
// the refund left when the session confirms, so the merchant is not paid
// what the payer got back (found by TestBooksBalanceAfterRandomKills'
// check that nobody receives more than was paid).
func TestRefundBeforeItsSessionConfirmsLowersThePayout(t *testing.T) {
	ctx := context.Background()
	f := newRefundFixture(t)
	treasury := f.svc.cfg.Treasury.EVMAddress
	f.stopMine()
	sess, addr := f.open(t, "5")
	f.pay(t, addr, 2_000_000) // underpaid: the session waits for the rest
	f.finalAll(t)
	under := f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).OnlyX(ctx)
	require.Equal(t, payment.StatusConfirmed, under.Status)
	require.Nil(t, under.SettlementStatus, "not counted until the session is confirmed")
	f.stopMine = autoMine(t, f.evm)
	out, err := f.refundOf(t, under, RefundInput{})
	require.NoError(t, err)
	require.False(t, out.Refund.AfterPayout)
	f.send(t, out.Refund)

	f.stopMine()
	f.pay(t, addr, 3_000_000)
	f.mine(t, func() bool { return f.reload(t, sess).Status == checkoutsession.StatusConfirmed })
	f.stopMine = autoMine(t, f.evm)
	under = f.db.Ent.Payment.GetX(ctx, under.ID)
	require.Equal(t, payment.SettlementStatusPending, *under.SettlementStatus)
	require.Zero(t, *under.SettlementNet, "refunded in full: nothing to pay")
	require.Zero(t, *under.SettlementFee)

	for _, p := range f.db.Ent.Payment.Query().Where(payment.SettlementStatusEQ(payment.SettlementStatusPending)).AllX(ctx) {
		f.settleWith(t, p, atOnce)
	}
	require.Equal(t, int64(7_242_750+2_997_000), f.balance(t, f.payee.Hex()), "the 7.25 and the top-up, not the refunded 2")
	require.Equal(t, int64(100_000_000+7_250+3_000), f.balance(t, treasury), "the treasury keeps its 100 and the fees")
	requireBalanced(t, f.env, f.svc)
}
