package agentpay

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/ent/refund"
	"agentpay/ent/transfer"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// agentCheckoutEnv is a service whose agents' wallets and test-mode
// checkout share a base devnet (a block every 50 ms, 2 confirmations), and
// a merchant with a webhook URL.
type agentCheckoutEnv struct {
	*sendEnv
	merchant *ent.Merchant
}

func startAgentCheckoutEnv(t *testing.T) *agentCheckoutEnv {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: 50 * time.Millisecond,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	svc := newTestService(t, env, Config{AgentMode: ModeTest})
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}}
	name := "Shop"
	reg, err := svc.RegisterMerchant(context.Background(), MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	e.merchant = env.DB.Ent.Merchant.UpdateOneID(reg.Merchant.ID).
		SetWebhookURL("http://127.0.0.1:9/hook").SetTestWebhookURL("http://127.0.0.1:9/hook").
		SaveX(context.Background())
	return e
}

// session creates a session of the merchant in the mode (livemode).
func (e *agentCheckoutEnv) session(t *testing.T, amount string, livemode bool) *ent.CheckoutSession {
	t.Helper()
	prefix := "cs_test_"
	if livemode {
		prefix = "cs_live_"
	}
	return e.db.Ent.CheckoutSession.Create().
		SetMerchantID(e.merchant.ID).
		SetExternalID(prefix + uuid.NewString()[:24]).
		SetLivemode(livemode).
		SetAmountUsd(decimal.RequireFromString(amount)).
		SetCurrency("USD").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC()).
		SaveX(context.Background())
}

func (e *agentCheckoutEnv) reloadSession(t *testing.T, sess *ent.CheckoutSession) *ent.CheckoutSession {
	t.Helper()
	return e.db.Ent.CheckoutSession.GetX(context.Background(), sess.ID)
}

func (e *agentCheckoutEnv) scanUntil(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := e.svc.ScanDeposits(context.Background(), ModeTest, chains.Base)
		require.NoError(t, err)
		return cond()
	}, 30*time.Second, 50*time.Millisecond)
}

func (e *agentCheckoutEnv) eventTypes(t *testing.T, sess *ent.CheckoutSession) []string {
	t.Helper()
	f := &paymentFixture{checkoutFixture: &checkoutFixture{db: e.db}, merchant: e.merchant}
	return eventTypes(f.sessionEvents(t, sess))
}

// TestAgentPaysCheckout: the payment is recorded from the known
// transaction before any scan (payment.detected, the session confirming),
// the deposit address holds exactly the amount, no fee leg went out; the
// scan then confirms that same payment (one row, one payment.confirmed, the
// settlement queued) and scanning again changes nothing.
func TestAgentPaysCheckout(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "20")
	sess := e.session(t, "12.34", false)
	treasuryBefore := e.onChain(t, chains.Base, e.treasuryAddress(chains.Base))

	res, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.Equal(t, chains.Base, res.Chain)
	requireDecimal(t, "12.34", res.AmountUSD)
	require.Equal(t, transfer.StatusCompleted, res.Transfer.Status)
	requireTransferKind(t, e.db, res.Transfer, transfer.KindCheckoutPayment)
	require.Zero(t, res.Transfer.Fee)
	require.NotNil(t, res.Payment, "recorded from the transaction, before any scan")
	require.Equal(t, "detected", res.Status)
	require.Equal(t, uint64(2), res.Required)
	require.Equal(t, res.Transfer.TxHash, res.Payment.TxHash)
	require.Equal(t, int64(12_340_000), res.Payment.AmountToken)
	require.Equal(t, checkoutsession.StatusConfirming, res.Session.Status)
	require.Equal(t, "base", res.Session.Chain)
	require.Equal(t, []string{EventPaymentDetected}, e.eventTypes(t, sess))

	requireDecimal(t, "12.34", e.onChain(t, chains.Base, res.Transfer.ToAddress), "the deposit address holds the exact amount")
	requireDecimal(t, "7.66", e.onChain(t, chains.Base, e.wallet(t, a, chains.Base)), "the agent paid the amount, no fee")
	requireDecimal(t, treasuryBefore.String(), e.onChain(t, chains.Base, e.treasuryAddress(chains.Base)), "no fee leg")

	e.scanUntil(t, func() bool { return e.reloadSession(t, sess).Status == checkoutsession.StatusConfirmed })
	ps := e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).AllX(ctx)
	require.Len(t, ps, 1, "the scan found the same payment, not a second one")
	require.Equal(t, res.Payment.ID, ps[0].ID)
	require.Equal(t, payment.StatusConfirmed, ps[0].Status)
	require.Equal(t, payment.SettlementStatusPending, *ps[0].SettlementStatus)
	evs := e.eventTypes(t, sess)
	require.Equal(t, EventPaymentDetected, evs[0])
	require.Equal(t, EventPaymentConfirmed, evs[len(evs)-1])
	require.Equal(t, 1, count(evs, EventPaymentConfirmed))
	require.Equal(t, 1, count(evs, EventPaymentDetected))

	for range 3 {
		_, err := e.svc.ScanDeposits(ctx, ModeTest, chains.Base)
		require.NoError(t, err)
	}
	require.Equal(t, 1, e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx))
	require.Equal(t, evs, e.eventTypes(t, sess))
	require.Equal(t, 1, testdb.CountRows(t, e.db, "river_job WHERE kind = 'settle_payment'"))

	// The agent's counters count it as sent.
	got := e.agent(t, a)
	require.Equal(t, int64(12_340_000), got.VolumeSent)
	require.Equal(t, int64(1), got.TxCount)

	// A paid session takes no second agent payment.
	_, _, err = e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.ErrorIs(t, err, ErrConflict)
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// TestAgentPayCheckoutRefusals: each refusal changes nothing (no transfer,
// the session as it was).
func TestAgentPayCheckoutRefusals(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "5")

	expired := e.session(t, "1", false)
	e.db.Ent.CheckoutSession.UpdateOne(expired).SetExpiresAt(time.Now().Add(-time.Minute)).ExecX(ctx)
	cancelled := e.session(t, "1", false)
	cancelled = e.db.Ent.CheckoutSession.UpdateOne(cancelled).SetStatus(checkoutsession.StatusCancelled).SaveX(ctx)
	// A customer's relayed authorization in flight for the session: an
	// agent may not pay it too (mayTakeSession).
	relaying := e.session(t, "1", false)
	e.db.Ent.Relay.Create().SetLivemode(false).SetChain("base").SetPayer("0x00000000000000000000000000000000000000aa").
		SetNonce("0x01").SetValue(1_000_000).SetMerchantID(relaying.MerchantID).SetSessionID(relaying.ID).
		SetInFlightUntil(time.Now().Add(time.Hour)).ExecX(ctx)

	for _, tc := range []struct {
		name string
		sess *ent.CheckoutSession
		id   string
		req  PayCheckoutRequest
		is   func(error) bool
		text string
	}{
		{name: "unknown session", id: "cs_test_nope", is: isErr(ErrNotFound)},
		{name: "empty id", id: "", is: IsValidation},
		{name: "live session, test-network agents", sess: e.session(t, "1", true), is: isErr(ErrConflict), text: "a live-mode session"},
		{name: "over the balance", sess: e.session(t, "6", false), is: isErr(ErrInsufficientFunds)},
		{name: "over the per-send limit", sess: e.session(t, "100.01", false), is: isErr(ErrForbidden), text: "per-send limit"},
		{name: "chain agents hold no wallet on", sess: e.session(t, "1", false), req: PayCheckoutRequest{Chain: "polygon"}, is: IsValidation},
		{name: "unknown chain", sess: e.session(t, "1", false), req: PayCheckoutRequest{Chain: "dogecoin"}, is: IsValidation},
		{name: "chain not configured", sess: e.session(t, "1", false), req: PayCheckoutRequest{Chain: "solana"}, is: IsValidation},
		{name: "expired", sess: expired, is: isErr(ErrConflict)},
		{name: "cancelled", sess: cancelled, is: isErr(ErrConflict)},
		{name: "a relay in flight", sess: relaying, is: isErr(ErrConflict), text: "being paid by a relayed authorization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.ExternalID = tc.id
			if tc.sess != nil {
				req.ExternalID = tc.sess.ExternalID
			}
			_, _, err := e.svc.PayCheckout(ctx, a, req)
			require.Error(t, err)
			require.True(t, tc.is(err), "%v", err)
			if tc.text != "" {
				require.Contains(t, err.Error(), tc.text)
			}
			if tc.sess != nil {
				require.Equal(t, tc.sess.Status, e.reloadSession(t, tc.sess).Status)
			}
		})
	}
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx), "no refusal recorded a transfer")
}

// TestAgentPayCheckoutIdempotent: a retry with the same key answers the
// first payment as it is now and pays nothing more; the key used for
// another session is refused.
func TestAgentPayCheckoutIdempotent(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "10")
	sess := e.session(t, "2.5", false)
	key := "order-77"

	first, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Transfer.ID, again.Transfer.ID)
	require.Equal(t, first.Payment.ID, again.Payment.ID)
	require.Equal(t, 1, e.db.Ent.Transfer.Query().CountX(ctx))

	other := e.session(t, "1", false)
	_, _, err = payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: other.ExternalID})
	require.ErrorIs(t, err, ErrIdempotencyKeyReused)
}

// TestAgentPaymentScannedFirst: when the deposit scan records the transfer
// before the payment's completion does, completing records nothing more.
func TestAgentPaymentScannedFirst(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "10")
	sess := e.session(t, "3", false)

	res, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	// Undo the request's recording, as if the scan had been first: the
	// transfer in flight again, the payment the scan's.
	e.db.Ent.Transfer.UpdateOne(res.Transfer).SetStatus(transfer.StatusSubmitted).ClearCompletedAt().ExecX(ctx)
	_, err = e.svc.completeTransfer(ctx, e.db.Ent.Transfer.GetX(ctx, res.Transfer.ID))
	require.NoError(t, err)
	require.Equal(t, 1, e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).CountX(ctx))
	require.Equal(t, 1, count(e.eventTypes(t, sess), EventPaymentDetected))
}

// TestAgentPaysCheckoutOnSolana: on Solana too the payment is recorded
// from the transaction under the identity the scan gives it (the token
// account's index), so the scan confirms that one payment.
func TestAgentPaysCheckoutOnSolana(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 2}, Jobs: true,
	})
	svc := newTestService(t, env, Config{AgentMode: ModeTest})
	e := &agentCheckoutEnv{sendEnv: &sendEnv{env: env, svc: svc, db: env.DB}}
	name := "Shop"
	reg, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	e.merchant = reg.Merchant
	a := e.register(t, "sol_buyer")
	e.fund(t, a, chains.Solana, "5")
	sess := e.session(t, "1.5", false)

	res, _, err := svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.Equal(t, chains.Solana, res.Chain)
	require.NotNil(t, res.Payment, "recorded from the transaction, before any scan")
	require.Equal(t, "detected", res.Status)
	require.Equal(t, int64(1_500_000), res.Payment.AmountToken)

	require.Eventually(t, func() bool {
		_, err := svc.ScanDeposits(ctx, ModeTest, chains.Solana)
		require.NoError(t, err)
		return e.reloadSession(t, sess).Status == checkoutsession.StatusConfirmed
	}, 60*time.Second, 200*time.Millisecond)
	ps := e.db.Ent.Payment.Query().Where(payment.SessionID(sess.ID)).AllX(ctx)
	require.Len(t, ps, 1, "the scan found the same payment, not a second one")
	require.Equal(t, res.Payment.ID, ps[0].ID)
	require.Equal(t, payment.StatusConfirmed, ps[0].Status)
}

// TestRefundOfAnAgentsPaymentGoesBackToItsWallet: a merchant refunds an
// agent's checkout payment through the one refunds API without naming an
// address: the refund goes back to the agent's custodial wallet, and the
// transaction that completes it tells the agent and its paired human
// (refund.received), once however often the refund job runs. A refund
// the merchant sends elsewhere tells no one.
func TestRefundOfAnAgentsPaymentGoesBackToItsWallet(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "20")
	name := randomName(t, "hum")
	human, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	p, err := e.svc.RequestPairing(ctx, a, PairingRequest{UserID: human.ID.String()})
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, human, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	e.env.Fund(t, chains.Base, e.svc.cfg.Treasury.EVMAddress, 100_000_000)
	auth := &MerchantAuth{Merchant: e.merchant, Mode: ModeTest}
	wallet := e.wallet(t, a, chains.Base)
	e.svc.cfg.Settlement.Wait = 10 * time.Second

	pay := func(amount string) *ent.CheckoutSession {
		t.Helper()
		sess := e.session(t, amount, false)
		_, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
		require.NoError(t, err)
		e.scanUntil(t, func() bool { return e.reloadSession(t, sess).Status == checkoutsession.StatusConfirmed })
		return sess
	}
	refundReceived := func(of Party) []AccountEvent {
		t.Helper()
		evs, err := e.svc.AccountEvents(ctx, of, 0, nil)
		require.NoError(t, err)
		var out []AccountEvent
		for _, ev := range evs {
			if ev.Kind == EventRefundReceived {
				out = append(out, ev)
			}
		}
		return out
	}

	sess := pay("12.50")
	requireDecimal(t, "7.5", e.onChain(t, chains.Base, wallet))
	created, err := e.svc.CreateRefund(ctx, auth, sess.ExternalID, RefundInput{AmountUSD: usdAmount("5"), Reason: "damaged"})
	require.NoError(t, err)
	require.Equal(t, wallet, created.Refund.ToAddress, "to the agent's wallet, which paid")
	require.Equal(t, refund.DestinationPayer, created.Refund.Destination, "the payer's address, not one chosen")
	for range 2 {
		res, err := e.svc.SendRefund(ctx, created.Refund.ID)
		require.NoError(t, err)
		require.True(t, res.Done, res.Waiting)
	}
	r := e.db.Ent.Refund.GetX(ctx, created.Refund.ID)
	require.Equal(t, refund.StatusCompleted, r.Status)
	requireDecimal(t, "12.5", e.onChain(t, chains.Base, wallet), "the money is back in the agent's wallet")
	for _, party := range []Party{AgentParty(a.ID), UserParty(human.ID)} {
		evs := refundReceived(party)
		require.Len(t, evs, 1, "told once")
		var data map[string]any
		d := json.NewDecoder(bytes.NewReader(evs[0].Data))
		d.UseNumber()
		require.NoError(t, d.Decode(&data))
		require.Equal(t, r.ExternalID, data["refund_id"])
		require.Equal(t, sess.ExternalID, data["session_external_id"])
		require.Equal(t, json.Number("5"), data["amount_usd"], "a JSON number, exact")
		require.Equal(t, wallet, data["to_address"])
		require.Equal(t, r.TxHash, data["tx_hash"])
		require.Equal(t, a.Username, data["agent"])
	}

	// Sent to an address the merchant chose: not the agent's money, no
	// event.
	other := pay("3")
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	elsewhere := crypto.PubkeyToAddress(key.PublicKey).Hex()
	created, err = e.svc.CreateRefund(ctx, auth, other.ExternalID, RefundInput{Address: elsewhere})
	require.NoError(t, err)
	res, err := e.svc.SendRefund(ctx, created.Refund.ID)
	require.NoError(t, err)
	require.True(t, res.Done, res.Waiting)
	require.Len(t, refundReceived(AgentParty(a.ID)), 1)
	require.Len(t, refundReceived(UserParty(human.ID)), 1)
}
