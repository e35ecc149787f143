package agentpay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/accountevent"
	"agentpay/ent/spendapproval"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
)

func units(s string) *int64 {
	u, err := ToBaseUnits("x", dec(s), USDCDecimals)
	if err != nil {
		panic(err)
	}
	n := u.Int64()
	return &n
}

func TestDecideSpend(t *testing.T) {
	send := func(amount string, recipient ...string) SpendOperation {
		return SpendOperation{Kind: SpendSend, Amount: *units(amount), Payee: recipient}
	}
	anaID, boID, cyID := uuid.New(), uuid.New(), uuid.New()
	ana := SpendRule{UserID: anaID, SetBy: "ana", Threshold: units("10")}
	anaDeny := SpendRule{UserID: anaID, SetBy: "ana", Threshold: units("10"), DenyByDefault: true}
	list := SpendRule{UserID: boID, SetBy: "bo", Allowed: []string{"shop_bot", "0xAbC", "0193-merchant", "Acme Books"}}
	listDeny := list
	listDeny.DenyByDefault = true
	caps := SpendRule{UserID: cyID, SetBy: "cy", PerPaymentCap: units("50"), DailyCap: units("200")}
	checkout := func(amount, merchantID string) SpendOperation {
		return SpendOperation{Kind: SpendPayCheckout, Amount: *units(amount), Payee: []string{merchantID}, PayeeLabel: "the merchant " + merchantID}
	}
	card := func(amount, merchant string) SpendOperation { return cardSpend(*units(amount), merchant) }
	for _, tc := range []struct {
		name     string
		rules    []SpendRule
		op       SpendOperation
		approved bool
		want     string
		reason   string
		heldBy   []uuid.UUID
	}{
		{"no policy", nil, send("1000"), false, SpendAllowed, "", nil},
		{"at the threshold", []SpendRule{ana}, send("10"), false, SpendAllowed, "", nil},
		{"above the threshold", []SpendRule{ana}, send("10.01"), false, SpendHeld, "above the approval threshold of 10 USD in the spending policy set by ana", []uuid.UUID{anaID}},
		{"deny by default", []SpendRule{anaDeny}, send("10.01"), false, SpendRefused, "set by ana, which denies by default", nil},
		{"approved skips the threshold", []SpendRule{anaDeny}, send("10.01"), true, SpendAllowed, "", nil},
		{"on the allow-list by name", []SpendRule{list}, send("5", "shop_bot"), false, SpendAllowed, "", nil},
		{"on the allow-list by address, any case", []SpendRule{list}, send("5", "x", "0xabc"), false, SpendAllowed, "", nil},
		{"not on the allow-list", []SpendRule{list}, send("5", "other"), false, SpendHeld, "the recipient is not on the allow-list of the spending policy set by bo", []uuid.UUID{boID}},
		// Checkout payments and card purchases meet the allow-list too.
		{"checkout at a listed merchant", []SpendRule{list}, checkout("5", "0193-merchant"), false, SpendAllowed, "", nil},
		{"checkout at an unlisted merchant", []SpendRule{list}, checkout("5", "0194-other"), false, SpendHeld, "the merchant 0194-other is not on the allow-list of the spending policy set by bo", []uuid.UUID{boID}},
		{"checkout at an unlisted merchant, deny by default", []SpendRule{listDeny}, checkout("5", "0194-other"), false, SpendRefused, "which denies by default", nil},
		{"checkout naming no merchant", []SpendRule{list}, SpendOperation{Kind: SpendPayCheckout, Amount: *units("5")}, false, SpendHeld, "not on the allow-list", []uuid.UUID{boID}},
		{"relayed payment at an unlisted merchant", []SpendRule{listDeny}, SpendOperation{Kind: SpendRelayedPayment, Amount: *units("1"), Payee: []string{"x"}}, false, SpendRefused, "not on the allow-list", nil},
		{"card at a listed merchant, any case", []SpendRule{list}, card("5", " acme books "), false, SpendAllowed, "", nil},
		{"card at an unlisted merchant", []SpendRule{list}, card("5", "Other Shop"), false, SpendHeld, `the card merchant "Other Shop" is not on the allow-list`, []uuid.UUID{boID}},
		{"card at an unlisted merchant, deny by default", []SpendRule{listDeny}, card("5", "Other Shop"), false, SpendRefused, "which denies by default", nil},
		{"per-payment cap", []SpendRule{caps}, send("50.01"), false, SpendRefused, "exceeds the per-payment cap of 50 USD in the spending policy set by cy", nil},
		{"cap applies when approved", []SpendRule{caps}, send("50.01"), true, SpendRefused, "per-payment cap", nil},
		{"strictest wins: refuse over hold", []SpendRule{ana, caps}, send("60"), false, SpendRefused, "per-payment cap", nil},
		{"strictest wins: hold over allow", []SpendRule{caps, ana}, send("20"), false, SpendHeld, "set by ana", []uuid.UUID{anaID}},
		{"one human's deny refuses", []SpendRule{ana, anaDeny}, send("20"), false, SpendRefused, "denies by default", nil},
		// Held by several: each of them decides.
		{"held by two", []SpendRule{ana, list}, send("20", "other"), false, SpendHeld, "set by ana; the recipient is not on the allow-list of the spending policy set by bo", []uuid.UUID{anaID, boID}},
		{"held by one of two", []SpendRule{ana, list}, send("20", "shop_bot"), false, SpendHeld, "set by ana", []uuid.UUID{anaID}},
		{"card above a threshold: its setter decides", []SpendRule{ana}, card("20", "Acme"), false, SpendHeld, "approval threshold", []uuid.UUID{anaID}},
		{"card denied by default", []SpendRule{anaDeny}, card("20", "Acme"), false, SpendRefused, "denies by default", nil},
		{"card over a cap", []SpendRule{caps}, card("51", "Acme"), false, SpendRefused, "per-payment cap", nil},
		{"checkout above the threshold", []SpendRule{ana}, SpendOperation{Kind: SpendPayCheckout, Amount: *units("11")}, false, SpendHeld, "approval threshold", []uuid.UUID{anaID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideSpend(tc.rules, tc.op, tc.approved)
			require.Equal(t, tc.want, d.Outcome)
			require.Contains(t, d.Reason, tc.reason)
			require.Equal(t, tc.heldBy, d.HeldBy, "who decides it")
			if tc.want == SpendRefused {
				require.ErrorIs(t, d.Err(), ErrForbidden)
			} else {
				require.NoError(t, d.Err())
			}
		})
	}
	// The lowest daily cap binds, checked with what was sent today.
	d := DecideSpend([]SpendRule{caps, {SetBy: "di", DailyCap: units("100")}}, send("1"), false)
	require.Equal(t, "di", d.DailyCapBy)
	require.NoError(t, d.checkDailyCap(*units("99"), *units("1")))
	err := d.checkDailyCap(*units("99.5"), *units("1"))
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "daily cap of 100 USD in the spending policy set by di")
}

// policyEnv is a card env (paired, verified human, stub clock) with a
// recipient agent.
type policyEnv struct {
	*cardEnv
	a, bob *ent.Agent
	u      *ent.User
}

func startPolicyEnv(t *testing.T) *policyEnv {
	t.Helper()
	e := startCardEnv(t)
	a, u := e.pairedAgent(t, "100", true)
	return &policyEnv{cardEnv: e, a: a, u: u, bob: e.register(t, "bob")}
}

func (e *policyEnv) setPolicy(t *testing.T, in SpendingPolicyInput) {
	t.Helper()
	_, err := e.svc.SetSpendingPolicy(context.Background(), &Viewer{User: e.u}, e.a.Username, in)
	require.NoError(t, err)
}

func ptr(s string) *decimal.Decimal { d := dec(s); return &d }

func (e *policyEnv) send(amount string) (*SendResult, error) {
	res, _, err := e.svc.Send(context.Background(), e.a, SendRequest{ToUsername: e.bob.Username, AmountUSD: dec(amount), Chain: "base"})
	return res, err
}

func (e *policyEnv) sentCount(t *testing.T) int {
	t.Helper()
	n, err := e.db.Ent.Transfer.Query().Where(transfer.FromAgentID(e.a.ID)).Count(context.Background())
	require.NoError(t, err)
	return n
}

func TestSetSpendingPolicyRefusals(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	v := &Viewer{User: e.u}
	lim := LimitsFor(string(e.a.Tier))
	over := func(d decimal.Decimal) *decimal.Decimal { o := d.Add(dec("0.01")); return &o }
	tierDetail := func(d decimal.Decimal) string {
		return fmt.Sprintf("%s USD is above the agent's tier %s limit of %s USD", d.Add(dec("0.01")), e.a.Tier, d)
	}
	for _, tc := range []struct {
		name   string
		agent  string
		in     SpendingPolicyInput
		want   error
		detail string
	}{
		{"per-payment cap above the tier", e.a.Username, SpendingPolicyInput{PerPaymentCap: over(lim.PerSend)}, nil, "per_payment_cap: " + tierDetail(lim.PerSend)},
		{"daily cap above the tier", e.a.Username, SpendingPolicyInput{DailyCap: over(lim.Daily)}, nil, "daily_cap: " + tierDetail(lim.Daily)},
		{"zero threshold", e.a.Username, SpendingPolicyInput{ApprovalThreshold: ptr("0")}, nil, "must be more than 0"},
		{"too many decimals", e.a.Username, SpendingPolicyInput{ApprovalThreshold: ptr("1.0000001")}, nil, "approval_threshold"},
		{"empty allow-list entry", e.a.Username, SpendingPolicyInput{AllowedRecipients: []string{" "}}, nil, "allowed_recipients"},
		{"not paired", e.bob.Username, SpendingPolicyInput{}, ErrNotFound, "no approved pairing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.SetSpendingPolicy(ctx, v, tc.agent, tc.in)
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				var ve *ValidationError
				require.ErrorAs(t, err, &ve)
			}
			require.Contains(t, err.Error(), tc.detail)
		})
	}
	n, err := e.db.Ent.SpendingPolicy.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "refusals record nothing")
	// At the tier's limits is allowed, and setting again replaces.
	e.setPolicy(t, SpendingPolicyInput{PerPaymentCap: &lim.PerSend, DailyCap: &lim.Daily})
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("5")})
	ps, err := e.svc.UserSpendingPolicies(ctx, e.u)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Nil(t, ps[0].PerPaymentCap())
	require.Equal(t, "5", ps[0].ApprovalThreshold().String())
}

func TestSpendingPolicyCapsAndDenyOnSends(t *testing.T) {
	e := startPolicyEnv(t)
	e.setPolicy(t, SpendingPolicyInput{PerPaymentCap: ptr("5"), DailyCap: ptr("7")})
	_, err := e.send("5.01")
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 5 USD in the spending policy set by "+e.u.Username)
	res, err := e.send("5")
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	_, err = e.send("2.01")
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "daily cap of 7 USD")
	require.Equal(t, 1, e.sentCount(t))

	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("1"), DenyByDefault: true})
	_, err = e.send("1.5")
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "which denies by default")
	require.Equal(t, 1, e.sentCount(t), "refused: nothing recorded")
	n, err := e.db.Ent.SpendApproval.Query().Count(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = e.send("0.5")
	require.NoError(t, err, "at the threshold: allowed")
}

func TestSpendApprovalApproveDenyExpire(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	v := &Viewer{User: e.u}
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2"), AllowedRecipients: []string{"someone_else"}})

	// Not on the allow-list: held.
	held, err := e.send("1")
	require.NoError(t, err)
	require.Equal(t, "awaiting_approval", held.Status)
	require.Nil(t, held.Transfer)
	require.Contains(t, held.Approval.Approval.Reason, "not on the allow-list")
	require.Equal(t, 0, e.sentCount(t))
	// The agent and the human are told.
	for _, who := range []*ent.AccountEventQuery{
		e.db.Ent.AccountEvent.Query().Where(accountevent.AgentID(e.a.ID), accountevent.Kind(EventApprovalRequested)),
		e.db.Ent.AccountEvent.Query().Where(accountevent.UserID(e.u.ID), accountevent.Kind(EventApprovalRequested)),
	} {
		n, err := who.Count(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}

	// Approved: it runs now, as it would have.
	id := held.Approval.Approval.ID.String()
	got, err := e.svc.ApproveSpendApproval(ctx, v, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.NotNil(t, got.Transfer)
	require.Equal(t, transfer.StatusCompleted, got.Transfer.Status)
	require.True(t, dec("0.999").Equal(e.onChain(t, chains.Base, e.wallet(t, e.bob, chains.Base))))
	seen, err := e.svc.AgentSpendApproval(ctx, e.a, id)
	require.NoError(t, err)
	require.Equal(t, got.Transfer.ID, seen.Transfer.ID)
	_, err = e.svc.ApproveSpendApproval(ctx, v, id, "", nil)
	require.ErrorIs(t, err, ErrConflict, "approved once")
	_, err = e.svc.DenySpendApproval(ctx, v, id)
	require.ErrorIs(t, err, ErrConflict)

	// Denied: nothing moves.
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2")})
	held, err = e.send("3")
	require.NoError(t, err)
	require.Contains(t, held.Approval.Approval.Reason, "above the approval threshold of 2 USD")
	denied, err := e.svc.DenySpendApproval(ctx, v, held.Approval.Approval.ID.String())
	require.NoError(t, err)
	require.Equal(t, "denied", denied.Status())
	require.Equal(t, 1, e.sentCount(t))

	// Expired: the worker's tick ends it; approving after is refused.
	held, err = e.send("3")
	require.NoError(t, err)
	e.clock.Advance(DefaultSpendApprovalTTL)
	_, err = e.svc.ApproveSpendApproval(ctx, v, held.Approval.Approval.ID.String(), "", nil)
	require.ErrorIs(t, err, ErrConflict)
	require.Contains(t, err.Error(), "expired")
	n, err := e.svc.ExpireSpendApprovals(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = e.svc.ExpireSpendApprovals(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "once")
	exp, err := e.svc.AgentSpendApproval(ctx, e.a, held.Approval.Approval.ID.String())
	require.NoError(t, err)
	require.Equal(t, "expired", exp.Status())
	require.Equal(t, 1, e.sentCount(t))

	// Approved but over a cap set meanwhile: failed, with the refusal.
	held, err = e.send("3")
	require.NoError(t, err)
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2"), PerPaymentCap: ptr("2.5")})
	failed, err := e.svc.ApproveSpendApproval(ctx, v, held.Approval.Approval.ID.String(), "", nil)
	require.NoError(t, err)
	require.Equal(t, "failed", failed.Status())
	require.Contains(t, failed.Approval.Error, "per-payment cap of 2.5 USD")
	require.Equal(t, 1, e.sentCount(t))

	// Another human (not paired) sees nothing.
	other, err := e.svc.CreateUser(ctx, NewUser{Email: "x" + randomName(t, "o") + "@example.com", Username: randomName(t, "o")})
	require.NoError(t, err)
	_, err = e.svc.DenySpendApproval(ctx, &Viewer{User: other}, held.Approval.Approval.ID.String())
	require.ErrorIs(t, err, ErrNotFound)
}

func TestSpendApprovalHeldSendIdempotent(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("1")})
	key := "held-1"
	req := SendRequest{ToUsername: e.bob.Username, AmountUSD: dec("2"), Chain: "base"}
	first, replayed, err := sendKeyed(e.svc, ctx, e.a, &key, req)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "awaiting_approval", first.Status)
	again, replayed, err := sendKeyed(e.svc, ctx, e.a, &key, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Approval.Approval.ID, again.Approval.Approval.ID)
	_, err = e.svc.ApproveSpendApproval(ctx, &Viewer{User: e.u}, first.Approval.Approval.ID.String(), "", nil)
	require.NoError(t, err)
	// The key now answers the send that ran.
	done, replayed, err := sendKeyed(e.svc, ctx, e.a, &key, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.NotNil(t, done.Transfer)
	require.Equal(t, "completed", done.Status)
	require.Equal(t, 1, e.sentCount(t))
}

// TestSpendApprovalDecisionsRace: approvals, denials and the expiry racing
// on one held send have one winner, and at most one transfer.
func TestSpendApprovalDecisionsRace(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	v := &Viewer{User: e.u}
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("1")})
	for round := 0; round < 3; round++ {
		held, err := e.send("2")
		require.NoError(t, err)
		id := held.Approval.Approval.ID.String()
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		record := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, ErrConflict):
				conflicts++
			default:
				t.Errorf("unexpected: %v", err)
			}
		}
		for i := 0; i < 3; i++ {
			wg.Add(2)
			go func() { defer wg.Done(); _, err := e.svc.ApproveSpendApproval(ctx, v, id, "", nil); record(err) }()
			go func() { defer wg.Done(); _, err := e.svc.DenySpendApproval(ctx, v, id); record(err) }()
		}
		wg.Wait()
		require.Equal(t, 1, wins, "one winner")
		require.Equal(t, 5, conflicts)
		cur, err := e.svc.AgentSpendApproval(ctx, e.a, id)
		require.NoError(t, err)
		require.Contains(t, []string{"approved", "denied"}, cur.Status())
		events, err := e.db.Ent.AccountEvent.Query().Where(accountevent.AgentID(e.a.ID),
			accountevent.KindIn(EventApprovalApproved, EventApprovalDenied)).Count(ctx)
		require.NoError(t, err)
		require.Equal(t, round+1, events, "one decision event per approval")
	}
	// The expiry racing a decision: one of them.
	held, err := e.send("2")
	require.NoError(t, err)
	e.clock.Advance(DefaultSpendApprovalTTL + time.Second)
	var wg sync.WaitGroup
	expired := make(chan int, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := e.svc.ExpireSpendApprovals(ctx)
			require.NoError(t, err)
			expired <- n
		}()
	}
	_, derr := e.svc.DenySpendApproval(ctx, v, held.Approval.Approval.ID.String())
	wg.Wait()
	close(expired)
	total := 0
	for n := range expired {
		total += n
	}
	require.ErrorIs(t, derr, ErrConflict)
	require.Equal(t, 1, total)
	cur, err := e.db.Ent.SpendApproval.Get(ctx, held.Approval.Approval.ID)
	require.NoError(t, err)
	require.Equal(t, spendapproval.StatusExpired, cur.Status)
}

// A checkout payment above a paired human's threshold is held (nothing
// recorded, the session untouched), replayed under its key, and on
// approval paid as it would have been: the session's payment recorded.
// Over a cap it is refused.
func TestSpendApprovalCheckoutPayment(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "10")
	name := randomName(t, "hum")
	u, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	p, err := e.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	v := &Viewer{User: u}
	_, err = e.svc.SetSpendingPolicy(ctx, v, a.Username, SpendingPolicyInput{ApprovalThreshold: ptr("2"), PerPaymentCap: ptr("5")})
	require.NoError(t, err)

	over := e.session(t, "6", false)
	_, _, err = e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: over.ExternalID})
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 5 USD")

	sess := e.db.Ent.CheckoutSession.UpdateOne(e.session(t, "2.5", false)).SetDescription("a held order").SaveX(ctx)
	key := "order-held"
	held, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "awaiting_approval", held.Status)
	require.Equal(t, sess.ExternalID, held.Approval.Approval.Recipient)
	// The human deciding sees who is paid and for what, not a session id.
	what, err := e.svc.SpendApprovalCheckout(ctx, held.Approval.Approval)
	require.NoError(t, err)
	require.Equal(t, &ApprovalCheckout{MerchantName: e.merchant.Name, MerchantVerified: e.merchant.EmailVerifiedAt != nil,
		Description: "a held order", Chain: ""}, what)
	require.NotEmpty(t, what.MerchantName)
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx))
	require.Equal(t, sess.Status, e.reloadSession(t, sess).Status, "the session is untouched")
	again, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, held.Approval.Approval.ID, again.Approval.Approval.ID)

	got, err := e.svc.ApproveSpendApproval(ctx, v, held.Approval.Approval.ID.String(), "", nil)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.NotNil(t, got.Transfer)
	paid, replayed, err := payCheckoutKeyed(e.svc, ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Nil(t, paid.Approval)
	require.Equal(t, got.Transfer.ID, paid.Transfer.ID)
	require.NotNil(t, paid.Payment, "the session's payment is recorded at once, as for any agent payment")
	require.Equal(t, 1, e.db.Ent.Transfer.Query().CountX(ctx))
}

// Card requests wait for their human anyway: a policy's caps and deny by
// default refuse them, a threshold alone does not.
func TestSpendingPolicyOnCardRequests(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	req := CardPurchaseRequest{AmountUSD: dec("3"), MerchantName: "Acme", Description: "x"}
	e.setPolicy(t, SpendingPolicyInput{PerPaymentCap: ptr("2")})
	_, _, err := e.svc.RequestCardPurchase(ctx, e.a, req)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 2 USD")
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2"), DenyByDefault: true})
	_, _, err = e.svc.RequestCardPurchase(ctx, e.a, req)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "denies by default")
	require.Zero(t, e.db.Ent.CardRequest.Query().CountX(ctx))
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2")})
	v := e.request(t, e.a, "3")
	// A cap set meanwhile is checked at approval.
	e.setPolicy(t, SpendingPolicyInput{PerPaymentCap: ptr("2.5")})
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: e.u}, v.Request.ID.String(), "", nil)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 2.5 USD")
}

// joinHuman pairs a new human with the policy env's agent: the human says
// yes, and the agent's first human consents.
func (e *policyEnv) joinHuman(t *testing.T, prefix string) *ent.User {
	t.Helper()
	ctx := context.Background()
	name := randomName(t, prefix)
	u, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	p, err := e.svc.RequestPairing(ctx, e.a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	v, err := e.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	require.Equal(t, PairingAwaitingConsent, v.Status, "the agent has a human already")
	_, err = e.svc.DecidePairingConsent(ctx, e.u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	return u
}

func (e *policyEnv) setPolicyOf(t *testing.T, u *ent.User, in SpendingPolicyInput) {
	t.Helper()
	_, err := e.svc.SetSpendingPolicy(context.Background(), &Viewer{User: u}, e.a.Username, in)
	require.NoError(t, err)
}

// TestHeldOperationDecidedByItsHolders: an operation a human's policy
// held is decided by that human. Another paired human can neither approve
// nor deny it (ErrForbidden, nothing changes). Held by two policies, each
// setter must approve (the first yes only records itself) and either may
// deny; a setter who unpairs stops counting. Two last yeses at once run
// it once.
func TestHeldOperationDecidedByItsHolders(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	ana, bo, cy := e.u, e.joinHuman(t, "bo"), e.joinHuman(t, "cy")
	va, vb, vc := &Viewer{User: ana}, &Viewer{User: bo}, &Viewer{User: cy}
	unchanged := func(t *testing.T, id string, sent int) {
		t.Helper()
		cur, err := e.svc.AgentSpendApproval(ctx, e.a, id)
		require.NoError(t, err)
		require.Equal(t, "awaiting_approval", cur.Status())
		require.Empty(t, cur.ApprovedBy)
		require.Equal(t, sent, e.sentCount(t))
	}

	// Held by ana's policy alone: bo and cy, paired too, cannot decide it.
	e.setPolicyOf(t, ana, SpendingPolicyInput{ApprovalThreshold: ptr("2")})
	held, err := e.send("3")
	require.NoError(t, err)
	id := held.Approval.Approval.ID.String()
	require.Equal(t, []string{ana.Username}, held.Approval.Deciders)
	for _, v := range []*Viewer{vb, vc} {
		_, err = e.svc.ApproveSpendApproval(ctx, v, id, "", nil)
		require.ErrorIs(t, err, ErrForbidden)
		require.Contains(t, err.Error(), "held by the spending policy of "+ana.Username+": only they can approve or deny it")
		_, err = e.svc.DenySpendApproval(ctx, v, id)
		require.ErrorIs(t, err, ErrForbidden)
		_, err = e.svc.BeginSpendApproval(ctx, v, id)
		require.ErrorIs(t, err, ErrForbidden)
		unchanged(t, id, 0)
	}
	// They still see it (and are told of it).
	list, err := e.svc.UserSpendApprovals(ctx, cy)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.False(t, AwaitsDecisionOf(list[0].Approval, cy.ID))
	require.True(t, AwaitsDecisionOf(list[0].Approval, ana.ID))
	got, err := e.svc.ApproveSpendApproval(ctx, va, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.Equal(t, 1, e.sentCount(t))

	// Held by ana's and bo's: each must approve; cy still cannot.
	e.setPolicyOf(t, bo, SpendingPolicyInput{ApprovalThreshold: ptr("1")})
	held, err = e.send("3")
	require.NoError(t, err)
	id = held.Approval.Approval.ID.String()
	require.ElementsMatch(t, []string{ana.Username, bo.Username}, held.Approval.Deciders)
	got, err = e.svc.ApproveSpendApproval(ctx, va, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, "awaiting_approval", got.Status(), "bo has not approved")
	require.Equal(t, []string{ana.Username}, got.ApprovedBy)
	require.Equal(t, 1, e.sentCount(t))
	again, err := e.svc.ApproveSpendApproval(ctx, va, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, []string{ana.Username}, again.ApprovedBy, "a second yes of one decider counts once")
	_, err = e.svc.ApproveSpendApproval(ctx, vc, id, "", nil)
	require.ErrorIs(t, err, ErrForbidden)
	got, err = e.svc.ApproveSpendApproval(ctx, vb, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status(), "the last yes runs it")
	require.Equal(t, bo.ID, *got.Approval.DecidedBy)
	require.Equal(t, 2, e.sentCount(t))

	// Either may deny, after the other's yes.
	held, err = e.send("3")
	require.NoError(t, err)
	id = held.Approval.Approval.ID.String()
	_, err = e.svc.ApproveSpendApproval(ctx, va, id, "", nil)
	require.NoError(t, err)
	denied, err := e.svc.DenySpendApproval(ctx, vb, id)
	require.NoError(t, err)
	require.Equal(t, "denied", denied.Status())
	require.Equal(t, 2, e.sentCount(t))

	// The two last yeses at once: it runs once.
	for round := 0; round < 3; round++ {
		held, err = e.send("3")
		require.NoError(t, err)
		id = held.Approval.Approval.ID.String()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, v := range []*Viewer{va, vb} {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[i] = e.svc.ApproveSpendApproval(ctx, v, id, "", nil) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, ErrConflict, "only a lost race may fail")
			}
		}
		cur, err := e.svc.AgentSpendApproval(ctx, e.a, id)
		require.NoError(t, err)
		require.Equal(t, "approved", cur.Status())
		require.Equal(t, 3+round, e.sentCount(t), "one transfer")
	}

	// A decider who unpairs stops counting: ana's yes is then enough.
	held, err = e.send("3")
	require.NoError(t, err)
	id = held.Approval.Approval.ID.String()
	pairings, err := e.svc.UserPairings(ctx, bo)
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, bo, pairings[0].Pairing.ID.String(), RevokePairing)
	require.NoError(t, err)
	_, err = e.svc.ApproveSpendApproval(ctx, vb, id, "", nil)
	require.ErrorIs(t, err, ErrNotFound, "no longer paired")
	got, err = e.svc.ApproveSpendApproval(ctx, va, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.Equal(t, 6, e.sentCount(t))
}

// TestCardRequestDecidedByItsHolders: a card purchase another human's
// policy holds (a merchant not on their allow-list) needs that human's
// yes beside the asked human's; a paired human who is neither cannot
// decide it, nor sees it.
func TestCardRequestDecidedByItsHolders(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	ana, bo, cy := e.u, e.joinHuman(t, "bo"), e.joinHuman(t, "cy")
	e.setPolicyOf(t, bo, SpendingPolicyInput{AllowedRecipients: []string{"Acme Books"}})
	listed := e.request(t, e.a, "2") // at Acme Books: only ana decides
	require.Equal(t, []string{ana.Username}, listed.Deciders)

	r, _, err := e.svc.RequestCardPurchase(ctx, e.a, CardPurchaseRequest{AmountUSD: dec("3"), MerchantName: "Other Shop", Description: "x"})
	require.NoError(t, err)
	id := r.Request.ID.String()
	require.Equal(t, []string{ana.Username, bo.Username}, r.Deciders)
	for _, who := range []*ent.User{ana, bo} {
		n, err := e.db.Ent.AccountEvent.Query().Where(accountevent.UserID(who.ID), accountevent.Kind(EventCardRequested)).Count(ctx)
		require.NoError(t, err)
		require.Positive(t, n, "each decider is told")
	}
	mine, err := e.svc.UserCardRequests(ctx, bo)
	require.NoError(t, err)
	require.Len(t, mine, 1, "bo sees what his policy holds")
	require.True(t, mine[0].AwaitsDecisionOf(bo.ID))
	seen, err := e.svc.UserCardRequests(ctx, cy)
	require.NoError(t, err)
	require.Empty(t, seen)
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: cy}, id, "", nil)
	require.ErrorIs(t, err, ErrForbidden)
	_, err = e.svc.DenyCardRequest(ctx, &Viewer{User: cy}, id)
	require.ErrorIs(t, err, ErrForbidden)

	got, err := e.svc.ApproveCardRequest(ctx, &Viewer{User: ana}, id, "", nil)
	require.NoError(t, err)
	require.Equal(t, CardPendingApproval, got.Status(), "bo has not approved")
	require.Nil(t, e.card(t, r.Request).ReserveTransferID, "nothing reserved yet")
	got, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: bo}, id, "", nil)
	require.NoError(t, err, "bo need not be identity-verified to approve what his policy holds")
	require.Equal(t, CardApproved, got.Status())
	require.ElementsMatch(t, []string{ana.Username, bo.Username}, got.ApprovedBy)
}

// TestAllowListGovernsCheckoutPayments: a policy's allow-list names
// merchants by id for checkout payments. An agent's payment to a merchant
// not on it is held for the policy's human (refused when the policy
// denies by default); to a listed merchant it is paid at once. A payment
// the agent signs with its own external wallet and the service relays
// (x402, the hosted page's wallet payment) cannot wait, so it is refused.
func TestAllowListGovernsCheckoutPayments(t *testing.T) {
	ctx := context.Background()
	e := startAgentCheckoutEnv(t)
	a := e.register(t, "buyer")
	e.fund(t, a, chains.Base, "20")
	name := randomName(t, "hum")
	u, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	p, err := e.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = e.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	v := &Viewer{User: u}
	otherName := "Elsewhere"
	other, err := e.svc.RegisterMerchant(ctx, MerchantInput{Name: &otherName, Email: checkoutPtr("else@example.com")})
	require.NoError(t, err)
	policy := func(deny bool) {
		_, err := e.svc.SetSpendingPolicy(ctx, v, a.Username, SpendingPolicyInput{AllowedRecipients: []string{other.Merchant.ID.String()}, DenyByDefault: deny})
		require.NoError(t, err)
	}

	policy(false)
	sess := e.session(t, "2", false)
	held, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.Equal(t, "awaiting_approval", held.Status)
	require.Contains(t, held.Approval.Approval.Reason, `the merchant "Shop" (id `+e.merchant.ID.String()+`) is not on the allow-list of the spending policy set by `+u.Username)
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx))

	policy(true)
	_, _, err = e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: e.session(t, "2", false).ExternalID})
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "which denies by default")
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx))

	// Listed: paid at once.
	e.merchant = other.Merchant
	paid, _, err := e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: e.session(t, "2", false).ExternalID})
	require.NoError(t, err)
	require.Equal(t, "detected", paid.Status)

	// The agent's own external wallet, relayed.
	payer := e.relayPayer(t, 10_000_000)
	_, err = e.db.Ent.Wallet.Create().SetAgentID(a.ID).SetChain("base").SetAddress(payer.addr).
		SetKind(wallet.KindExternal).SetVerified(true).Save(ctx)
	require.NoError(t, err)
	e.merchant = e.db.Ent.Merchant.GetX(ctx, e.reloadSession(t, sess).MerchantID) // Shop, unlisted
	unlisted := e.session(t, "1", false)
	now := time.Now().Unix()
	auth := signTransferAuthorization(t, payer.key, e.tokenDomain(t), e.depositAddress(t, unlisted), 1_000_000, now-600, now+3600)
	_, err = e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: unlisted.ExternalID, Chain: "base", Authorization: auth})
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "not on the allow-list")
	require.ErrorIs(t, e.svc.VerifyAuthorizedPayment(ctx, AuthorizedPaymentRequest{ExternalID: unlisted.ExternalID, Chain: "base", Authorization: auth}), ErrForbidden)
	reason, ok := X402Reason(err)
	require.True(t, ok)
	require.Equal(t, "invalid_payment", reason, "x402 answers it as a refused payment")
	requireDecimal(t, "10", e.onChain(t, chains.Base, payer.addr), "nothing relayed")
	// Held rather than denied by default: refused all the same.
	policy(false)
	_, err = e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: unlisted.ExternalID, Chain: "base", Authorization: auth})
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "cannot wait for approval")
	// A listed merchant's session is relayed.
	e.merchant = other.Merchant
	listed := e.session(t, "1", false)
	auth = signTransferAuthorization(t, payer.key, e.tokenDomain(t), e.depositAddress(t, listed), 1_000_000, now-600, now+3600)
	res, err := e.svc.PayWithAuthorization(ctx, AuthorizedPaymentRequest{ExternalID: listed.ExternalID, Chain: "base", Authorization: auth})
	require.NoError(t, err)
	require.Equal(t, "detected", res.Status)
}

// TestAllowListGovernsCardRequests: a card purchase at a merchant not on
// the allow-list is refused when the policy denies by default, and held
// for its human otherwise (TestCardRequestDecidedByItsHolders).
func TestAllowListGovernsCardRequests(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	e.setPolicy(t, SpendingPolicyInput{AllowedRecipients: []string{"acme books"}, DenyByDefault: true})
	_, _, err := e.svc.RequestCardPurchase(ctx, e.a, CardPurchaseRequest{AmountUSD: dec("1"), MerchantName: "Other Shop"})
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), `the card merchant "Other Shop" is not on the allow-list`)
	require.Zero(t, e.db.Ent.CardRequest.Query().CountX(ctx))
	ok := e.request(t, e.a, "1") // Acme Books, listed (any case)
	require.Equal(t, CardPendingApproval, ok.Status())
}
