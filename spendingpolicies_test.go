package agentpay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/accountevent"
	"agentpay/ent/spendapproval"
	"agentpay/ent/transfer"
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
		return SpendOperation{Kind: SpendSend, Amount: *units(amount), Recipient: recipient}
	}
	ana := SpendRule{SetBy: "ana", Threshold: units("10")}
	anaDeny := SpendRule{SetBy: "ana", Threshold: units("10"), DenyByDefault: true}
	list := SpendRule{SetBy: "bo", Allowed: []string{"shop_bot", "0xAbC"}}
	caps := SpendRule{SetBy: "cy", PerPaymentCap: units("50"), DailyCap: units("200")}
	for _, tc := range []struct {
		name     string
		rules    []SpendRule
		op       SpendOperation
		approved bool
		want     string
		reason   string
	}{
		{"no policy", nil, send("1000"), false, SpendAllowed, ""},
		{"at the threshold", []SpendRule{ana}, send("10"), false, SpendAllowed, ""},
		{"above the threshold", []SpendRule{ana}, send("10.01"), false, SpendHeld, "above the approval threshold of 10 USD in the spending policy set by ana"},
		{"deny by default", []SpendRule{anaDeny}, send("10.01"), false, SpendRefused, "set by ana, which denies by default"},
		{"approved skips the threshold", []SpendRule{anaDeny}, send("10.01"), true, SpendAllowed, ""},
		{"on the allow-list by name", []SpendRule{list}, send("5", "shop_bot"), false, SpendAllowed, ""},
		{"on the allow-list by address, any case", []SpendRule{list}, send("5", "x", "0xabc"), false, SpendAllowed, ""},
		{"not on the allow-list", []SpendRule{list}, send("5", "other"), false, SpendHeld, "not on the allow-list of the spending policy set by bo"},
		{"allow-list is for sends only", []SpendRule{list}, SpendOperation{Kind: SpendPayCheckout, Amount: *units("5")}, false, SpendAllowed, ""},
		{"per-payment cap", []SpendRule{caps}, send("50.01"), false, SpendRefused, "exceeds the per-payment cap of 50 USD in the spending policy set by cy"},
		{"cap applies when approved", []SpendRule{caps}, send("50.01"), true, SpendRefused, "per-payment cap"},
		{"strictest wins: refuse over hold", []SpendRule{ana, caps}, send("60"), false, SpendRefused, "per-payment cap"},
		{"strictest wins: hold over allow", []SpendRule{caps, ana}, send("20"), false, SpendHeld, "set by ana"},
		{"one human's deny refuses", []SpendRule{ana, anaDeny}, send("20"), false, SpendRefused, "denies by default"},
		{"card under its own approval", []SpendRule{ana}, SpendOperation{Kind: SpendCardPurchase, Amount: *units("20")}, false, SpendAllowed, ""},
		{"card denied by default", []SpendRule{anaDeny}, SpendOperation{Kind: SpendCardPurchase, Amount: *units("20")}, false, SpendRefused, "denies by default"},
		{"card over a cap", []SpendRule{caps}, SpendOperation{Kind: SpendCardPurchase, Amount: *units("51")}, false, SpendRefused, "per-payment cap"},
		{"checkout above the threshold", []SpendRule{ana}, SpendOperation{Kind: SpendPayCheckout, Amount: *units("11")}, false, SpendHeld, "approval threshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideSpend(tc.rules, tc.op, tc.approved)
			require.Equal(t, tc.want, d.Outcome)
			require.Contains(t, d.Reason, tc.reason)
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
	return e.svc.Send(context.Background(), e.a, SendRequest{ToUsername: e.bob.Username, AmountUSD: dec(amount), Chain: "base"})
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
	got, err := e.svc.ApproveSpendApproval(ctx, v, id, "", nil, 0)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.NotNil(t, got.Transfer)
	require.Equal(t, transfer.StatusCompleted, got.Transfer.Status)
	require.True(t, dec("0.999").Equal(e.onChain(t, chains.Base, e.wallet(t, e.bob, chains.Base))))
	seen, err := e.svc.AgentSpendApproval(ctx, e.a, id)
	require.NoError(t, err)
	require.Equal(t, got.Transfer.ID, seen.Transfer.ID)
	_, err = e.svc.ApproveSpendApproval(ctx, v, id, "", nil, 0)
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
	_, err = e.svc.ApproveSpendApproval(ctx, v, held.Approval.Approval.ID.String(), "", nil, 0)
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
	failed, err := e.svc.ApproveSpendApproval(ctx, v, held.Approval.Approval.ID.String(), "", nil, 0)
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
	first, replayed, err := e.svc.SendIdempotent(ctx, e.a, &key, req)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "awaiting_approval", first.Status)
	again, replayed, err := e.svc.SendIdempotent(ctx, e.a, &key, req)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.Approval.Approval.ID, again.Approval.Approval.ID)
	_, err = e.svc.ApproveSpendApproval(ctx, &Viewer{User: e.u}, first.Approval.Approval.ID.String(), "", nil, 0)
	require.NoError(t, err)
	// The key now answers the send that ran.
	done, replayed, err := e.svc.SendIdempotent(ctx, e.a, &key, req)
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
			go func() { defer wg.Done(); _, err := e.svc.ApproveSpendApproval(ctx, v, id, "", nil, 0); record(err) }()
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
	_, err = e.svc.PayCheckout(ctx, a, PayCheckoutRequest{ExternalID: over.ExternalID})
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 5 USD")

	sess := e.session(t, "2.5", false)
	key := "order-held"
	held, replayed, err := e.svc.PayCheckoutIdempotent(ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "awaiting_approval", held.Status)
	require.Equal(t, sess.ExternalID, held.Approval.Approval.Recipient)
	require.Zero(t, e.db.Ent.Transfer.Query().CountX(ctx))
	require.Equal(t, sess.Status, e.reloadSession(t, sess).Status, "the session is untouched")
	again, replayed, err := e.svc.PayCheckoutIdempotent(ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, held.Approval.Approval.ID, again.Approval.Approval.ID)

	got, err := e.svc.ApproveSpendApproval(ctx, v, held.Approval.Approval.ID.String(), "", nil, 0)
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.NotNil(t, got.Transfer)
	paid, replayed, err := e.svc.PayCheckoutIdempotent(ctx, a, &key, PayCheckoutRequest{ExternalID: sess.ExternalID})
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
	_, _, err := e.svc.RequestCardPurchase(ctx, e.a, nil, req)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 2 USD")
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2"), DenyByDefault: true})
	_, _, err = e.svc.RequestCardPurchase(ctx, e.a, nil, req)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "denies by default")
	require.Zero(t, e.db.Ent.CardRequest.Query().CountX(ctx))
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("2")})
	v := e.request(t, e.a, "3")
	// A cap set meanwhile is checked at approval.
	e.setPolicy(t, SpendingPolicyInput{PerPaymentCap: ptr("2.5")})
	_, err = e.svc.ApproveCardRequest(ctx, &Viewer{User: e.u}, v.Request.ID.String(), "", nil, 0)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "per-payment cap of 2.5 USD")
}
