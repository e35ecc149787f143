package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/testdb"
)

// paymentFixture is the checkout fixture (a real base devnet, blocks only on
// Commit, 2 confirmations required) with a merchant that has a webhook URL
// and a service that can enqueue deliveries (an insert-only River client).
type paymentFixture struct {
	*checkoutFixture
	merchant *ent.Merchant
	// events are every deposit event the scans reported, for replaying.
	events []chains.DepositEvent
}

func newPaymentFixture(t *testing.T) *paymentFixture {
	t.Helper()
	ctx := context.Background()
	f := &paymentFixture{checkoutFixture: startCheckoutFixture(t, false, true)}
	reg := f.checkoutFixture.merchant(t, "Shop", nil)
	f.db.Ent.Merchant.UpdateOneID(reg.Merchant.ID).SetWebhookURL("http://127.0.0.1:9/hook").SetTestWebhookURL("http://127.0.0.1:9/hook").ExecX(ctx)
	m, err := f.db.Ent.Merchant.Get(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	f.merchant = m
	f.scan(t) // the watcher starts at the head
	return f
}

// open creates a session with metadata and selects base for it; it answers
// the session and its deposit address.
func (f *paymentFixture) open(t *testing.T, amount string) (*ent.CheckoutSession, common.Address) {
	t.Helper()
	sess := f.session(t, f.merchant, amount, func(c *ent.CheckoutSessionCreate) {
		c.SetMetadata(map[string]any{"order_id": "A-17", "qty": float64(2)})
	})
	d, err := f.svc.SelectPaymentMethod(context.Background(), sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	return sess, common.HexToAddress(d.Address)
}

func (f *paymentFixture) scan(t *testing.T) {
	t.Helper()
	res, err := f.svc.ScanDeposits(context.Background(), ModeTest, chains.Base)
	require.NoError(t, err)
	f.events = append(f.events, res.Events...)
}

func (f *paymentFixture) pay(t *testing.T, to common.Address, units int64) common.Hash {
	t.Helper()
	h, err := f.evm.Send(context.Background(), to, big.NewInt(units))
	require.NoError(t, err)
	f.scan(t)
	return h
}

// mine commits blocks and scans until cond holds (at most 8 blocks).
func (f *paymentFixture) mine(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 8 && !cond(); i++ {
		f.evm.Commit()
		f.scan(t)
	}
	require.True(t, cond())
}

// finalAll mines until no deposit is pending in the watcher.
func (f *paymentFixture) finalAll(t *testing.T) {
	t.Helper()
	f.mine(t, func() bool {
		n, err := f.db.Ent.Payment.Query().Where(payment.StatusIn(payment.StatusDetected, payment.StatusConfirming)).Count(context.Background())
		require.NoError(t, err)
		return n == 0
	})
}

func (f *paymentFixture) reload(t *testing.T, sess *ent.CheckoutSession) *ent.CheckoutSession {
	t.Helper()
	s, err := f.db.Ent.CheckoutSession.Get(context.Background(), sess.ID)
	require.NoError(t, err)
	return s
}

type recordedEvent struct {
	Type string
	Body map[string]any
	Data map[string]any
	Row  *ent.WebhookEvent
}

// sessionEvents answers the session's webhook events in the order written.
func (f *paymentFixture) sessionEvents(t *testing.T, sess *ent.CheckoutSession) []recordedEvent {
	t.Helper()
	rows, err := f.db.Ent.WebhookEvent.Query().Where(webhookevent.SessionID(sess.ID)).
		Order(ent.Asc(webhookevent.FieldCreatedAt)).All(context.Background())
	require.NoError(t, err)
	var out []recordedEvent
	for _, r := range rows {
		var body map[string]any
		require.NoError(t, json.Unmarshal(r.Payload, &body))
		require.Equal(t, r.EventType, body["event"])
		require.Equal(t, f.merchant.ID, r.MerchantID)
		out = append(out, recordedEvent{Type: r.EventType, Body: body, Data: body["data"].(map[string]any), Row: r})
	}
	return out
}

func eventTypes(evs []recordedEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func findEvent(t *testing.T, evs []recordedEvent, kind string) recordedEvent {
	t.Helper()
	var found []recordedEvent
	for _, e := range evs {
		if e.Type == kind {
			found = append(found, e)
		}
	}
	require.Len(t, found, 1, "exactly one %s in %v", kind, eventTypes(evs))
	return found[0]
}

// snapshot is everything the payment processing writes, to compare before
// and after replaying events.
func (f *paymentFixture) snapshot(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	type row struct {
		Sessions   []*ent.CheckoutSession
		Payments   []*ent.Payment
		Events     []*ent.WebhookEvent
		Deliveries int
	}
	var r row
	var err error
	r.Sessions, err = f.db.Ent.CheckoutSession.Query().Order(ent.Asc(checkoutsession.FieldID)).All(ctx)
	require.NoError(t, err)
	r.Payments, err = f.db.Ent.Payment.Query().Order(ent.Asc(payment.FieldID)).All(ctx)
	require.NoError(t, err)
	r.Events, err = f.db.Ent.WebhookEvent.Query().Order(ent.Asc(webhookevent.FieldID)).All(ctx)
	require.NoError(t, err)
	r.Deliveries, err = f.db.Ent.WebhookDelivery.Query().Count(ctx)
	require.NoError(t, err)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return string(b)
}

// replay applies every event seen so far once more, as a scan re-run after
// a crash before its cursor was saved would: nothing may change.
func (f *paymentFixture) replay(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	before := f.snapshot(t)
	addrs, err := f.svc.watchedAddresses(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	byNorm := map[string]string{}
	for _, a := range addrs {
		byNorm[f.svc.wallets(chains.Base).NormalizeAddress(a)] = a
	}
	for range 2 {
		err = f.db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			d := &depositTx{s: f.svc, tx: tx, sqlTx: sqlTx, mode: ModeTest, chain: chains.Base, decimals: 6, addrs: byNorm}
			for _, ev := range f.events {
				if ev.Kind == chains.DepositRemoved {
					continue // a removal replayed after the re-seen would undo it; the watcher never does that
				}
				if err := d.apply(ctx, ev); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	f.scan(t)
	require.Equal(t, before, f.snapshot(t), "replaying the deposit events changed something")
}

func requireDec(t *testing.T, want string, got any) {
	t.Helper()
	n, ok := got.(float64)
	require.True(t, ok, "%v is a JSON number", got)
	require.True(t, decimal.RequireFromString(want).Equal(decimal.NewFromFloat(n)), "want %s, got %v", want, got)
}

func TestPaymentExactAmountConfirms(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	sess, addr := f.open(t, "7.25")
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, sess).Status)

	tx := f.pay(t, addr, 7_250_000)
	p, err := f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Only(ctx)
	require.NoError(t, err)
	require.Equal(t, tx.Hex(), p.TxHash)
	require.Equal(t, int64(7_250_000), p.AmountToken)
	require.True(t, decimal.RequireFromString("7.25").Equal(p.AmountUsd))
	require.Equal(t, crypto.PubkeyToAddress(f.evm.Payer.PublicKey).Hex(), common.HexToAddress(p.FromAddress).Hex())
	require.False(t, p.Late)
	require.Regexp(t, `^pay_[0-9A-Za-z]{24}$`, p.ExternalID)
	require.NotEqual(t, payment.StatusConfirmed, p.Status)
	require.Equal(t, checkoutsession.StatusConfirming, f.reload(t, sess).Status)

	st, err := f.svc.CheckoutStatus(ctx, sess.ExternalID, "")
	require.NoError(t, err)
	require.Equal(t, "7.25", st.AmountPaid.String())

	f.mine(t, func() bool { return f.reload(t, sess).Status == checkoutsession.StatusConfirmed })
	got := f.reload(t, sess)
	require.NotNil(t, got.ConfirmedAt)
	p, err = f.db.Ent.Payment.Get(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, payment.StatusConfirmed, p.Status)
	require.NotNil(t, p.ConfirmedAt)
	require.Equal(t, payment.SettlementStatusPending, *p.SettlementStatus, "queued for the settlement job")
	require.Equal(t, int64(7_250), *p.SettlementFee)
	require.Equal(t, int64(7_242_750), *p.SettlementNet)
	require.Equal(t, 1, testdb.CountRows(t, f.db, "river_job WHERE kind = 'settle_payment'"))

	evs := f.sessionEvents(t, sess)
	require.Equal(t, EventPaymentDetected, evs[0].Type)
	require.Equal(t, EventPaymentConfirmed, evs[len(evs)-1].Type)
	for _, kind := range []string{EventPaymentDetected, EventPaymentConfirmed} {
		e := findEvent(t, evs, kind)
		d := e.Data
		require.Equal(t, sess.ExternalID, d["session_external_id"], kind)
		require.Equal(t, p.ExternalID, d["payment_external_id"], kind)
		requireDec(t, "7.25", d["amount_usd"])
		requireDec(t, "7.25", d["amount_token"])
		require.Equal(t, "USDC", d["token"])
		require.Equal(t, "base", d["chain"])
		require.Equal(t, tx.Hex(), d["tx_hash"])
		require.Equal(t, p.FromAddress, d["from_address"])
		require.Equal(t, map[string]any{"order_id": "A-17", "qty": float64(2)}, d["metadata"])
		require.Equal(t, false, e.Body["livemode"])
		require.NotEmpty(t, e.Body["timestamp"])
		require.NotContains(t, d, "overpaid_usd")
		n, err := f.db.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(e.Row.ID)).Count(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "one delivery enqueued for %s", kind)
	}
	for _, e := range evs {
		require.NotEqual(t, EventPaymentFailed, e.Type)
	}
	f.replay(t)
}

func TestPaymentUnderpaidThenToppedUp(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	sess, addr := f.open(t, "10")

	f.pay(t, addr, 4_000_000)
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, sess).Status, "underpaid: still waiting")
	f.finalAll(t)
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, sess).Status, "a confirmed underpayment does not confirm the session")
	_, err := f.svc.CancelSession(ctx, &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}, sess.ExternalID)
	require.ErrorIs(t, err, ErrConflict, "a payment is seen: no cancel")

	f.pay(t, addr, 6_000_000)
	require.Equal(t, checkoutsession.StatusConfirming, f.reload(t, sess).Status)
	f.mine(t, func() bool { return f.reload(t, sess).Status == checkoutsession.StatusConfirmed })

	evs := f.sessionEvents(t, sess)
	detected := 0
	for _, e := range evs {
		if e.Type == EventPaymentDetected {
			detected++
		}
		require.NotEqual(t, EventPaymentFailed, e.Type)
	}
	require.Equal(t, 2, detected)
	c := findEvent(t, evs, EventPaymentConfirmed)
	requireDec(t, "6", c.Data["amount_usd"])
	requireDec(t, "10", c.Data["amount_paid_usd"])
	require.NotContains(t, c.Data, "overpaid_usd")
	f.replay(t)
}

func TestPaymentOverpaidConfirmsWithExcess(t *testing.T) {
	f := newPaymentFixture(t)
	sess, addr := f.open(t, "5")
	f.pay(t, addr, 7_500_000)
	f.mine(t, func() bool { return f.reload(t, sess).Status == checkoutsession.StatusConfirmed })
	c := findEvent(t, f.sessionEvents(t, sess), EventPaymentConfirmed)
	requireDec(t, "7.5", c.Data["amount_usd"])
	requireDec(t, "2.5", c.Data["overpaid_usd"])
	requireDec(t, "7.5", c.Data["amount_paid_usd"])
	requireDec(t, "5", c.Data["amount_expected_usd"])
	f.replay(t)
}

// pastDeadline moves a session's expires_at into the past.
func (f *paymentFixture) pastDeadline(t *testing.T, sess *ent.CheckoutSession) {
	t.Helper()
	f.db.Ent.CheckoutSession.UpdateOneID(sess.ID).SetExpiresAt(time.Now().Add(-time.Second).UTC()).ExecX(context.Background())
}

func TestLatePaymentIsRecorded(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)

	expired, addr := f.open(t, "5")
	f.pastDeadline(t, expired)
	n, err := f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	cancelled, addr2 := f.open(t, "8")
	_, err = f.svc.CancelSession(ctx, &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}, cancelled.ExternalID)
	require.NoError(t, err)

	tx := f.pay(t, addr, 5_000_000)
	tx2 := f.pay(t, addr2, 8_000_000)
	f.finalAll(t)

	for _, c := range []struct {
		sess   *ent.CheckoutSession
		status checkoutsession.Status
		tx     common.Hash
		amount string
	}{
		{expired, checkoutsession.StatusExpired, tx, "5"},
		{cancelled, checkoutsession.StatusCancelled, tx2, "8"},
	} {
		require.Equal(t, c.status, f.reload(t, c.sess).Status, "a late payment does not change the session")
		p, err := f.db.Ent.Payment.Query().Where(payment.SessionID(c.sess.ID)).Only(ctx)
		require.NoError(t, err)
		require.True(t, p.Late)
		require.Equal(t, payment.StatusConfirmed, p.Status, "followed to finality, held for refund")
		require.Equal(t, c.tx.Hex(), p.TxHash)

		evs := f.sessionEvents(t, c.sess)
		e := findEvent(t, evs, EventPaymentFailed)
		require.Equal(t, FailReasonLate, e.Data["reason"])
		require.Equal(t, p.ExternalID, e.Data["payment_external_id"])
		requireDec(t, c.amount, e.Data["amount_usd"])
		require.Equal(t, c.tx.Hex(), e.Data["tx_hash"])
		for _, e := range evs {
			require.NotContains(t, []string{EventPaymentDetected, EventPaymentConfirmed}, e.Type)
		}
	}
	f.replay(t)
}

// applyEvents applies watcher events directly, in one transaction, as a
// scan would.
func (f *paymentFixture) applyEvents(t *testing.T, evs ...chains.DepositEvent) {
	t.Helper()
	ctx := context.Background()
	addrs, err := f.svc.watchedAddresses(ctx, ModeTest, chains.Base)
	require.NoError(t, err)
	byNorm := map[string]string{}
	for _, a := range addrs {
		byNorm[f.svc.wallets(chains.Base).NormalizeAddress(a)] = a
	}
	require.NoError(t, f.db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		d := &depositTx{s: f.svc, tx: tx, sqlTx: sqlTx, mode: ModeTest, chain: chains.Base, decimals: 6, addrs: byNorm}
		for _, ev := range evs {
			if err := d.apply(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestReorgedPaymentStopsCounting: a payment whose block leaves the chain no
// longer counts (the session waits again, and can expire); re-included, it
// counts again, or is late once the session has ended.
func TestReorgedPaymentStopsCounting(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	sess, addr := f.open(t, "7.25")
	f.pay(t, addr, 7_250_000)
	require.Equal(t, checkoutsession.StatusConfirming, f.reload(t, sess).Status)
	var seen chains.DepositEvent
	for _, ev := range f.events {
		if ev.Kind == chains.DepositSeen {
			seen = ev
		}
	}
	removed := seen
	removed.Kind = chains.DepositRemoved

	f.applyEvents(t, removed)
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, sess).Status)
	p, err := f.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).Only(ctx)
	require.NoError(t, err)
	require.Equal(t, payment.StatusFailed, p.Status)
	st, err := f.svc.CheckoutStatus(ctx, sess.ExternalID, "")
	require.NoError(t, err)
	require.True(t, st.AmountPaid.IsZero())
	f.applyEvents(t, removed) // twice: nothing more

	f.applyEvents(t, seen) // re-included
	require.Equal(t, checkoutsession.StatusConfirming, f.reload(t, sess).Status)
	p, err = f.db.Ent.Payment.Get(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, payment.StatusDetected, p.Status)
	require.False(t, p.Late)
	require.Equal(t, []string{EventPaymentDetected}, eventTypes(f.sessionEvents(t, sess)), "detected once")

	// Removed again, the session expires with nothing counted; re-included
	// after that, the payment is late.
	f.applyEvents(t, removed)
	f.pastDeadline(t, sess)
	n, err := f.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	f.applyEvents(t, seen)
	f.applyEvents(t, seen)
	p, err = f.db.Ent.Payment.Get(ctx, p.ID)
	require.NoError(t, err)
	require.True(t, p.Late)
	require.Equal(t, checkoutsession.StatusExpired, f.reload(t, sess).Status)
	evs := f.sessionEvents(t, sess)
	require.Equal(t, []string{EventPaymentDetected, EventSessionExpired, EventPaymentFailed}, eventTypes(evs))
	require.Equal(t, FailReasonLate, evs[2].Data["reason"])
}

// TestZeroValueTransferIsNotAPayment: a transfer of nothing to a deposit
// address (free for anyone to send) records no payment and sends no event,
// so the session keeps its choices: the customer can still change chain and
// the merchant cancel. Whether the watcher reports it or not (the chain's
// own and an adapter that would).
func TestZeroValueTransferIsNotAPayment(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	sess, addr := f.open(t, "5.00")
	f.pay(t, addr, 0)
	f.mine(t, func() bool { return true })

	zero := chains.DepositEvent{Kind: chains.DepositSeen, Required: 2, Confirmations: 1, Deposit: chains.Deposit{
		Chain: chains.Base, TxHash: "0x" + strings.Repeat("ab", 32), From: addr.Hex(), To: addr.Hex(),
		Amount: new(big.Int), Block: 1, BlockHash: "0x" + strings.Repeat("cd", 32)}}
	f.applyEvents(t, zero)
	final := zero
	final.Kind, final.Confirmations = chains.DepositFinal, 2
	f.applyEvents(t, final)

	n, err := f.db.Ent.Payment.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no payment")
	require.Empty(t, f.sessionEvents(t, sess), "no event")
	require.Equal(t, checkoutsession.StatusDetecting, f.reload(t, sess).Status)
	_, err = f.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err, "the customer can still choose")
	cancelled, err := f.svc.CancelSession(ctx, &MerchantAuth{Merchant: f.merchant, Mode: ModeTest}, sess.ExternalID)
	require.NoError(t, err, "the merchant can still cancel")
	require.Equal(t, checkoutsession.StatusCancelled, cancelled.Status)
}
