package agentpay

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/accountevent"
	"agentpay/ent/mailmessage"
	"agentpay/ent/transfer"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
)

// softKeyOf is the passkey of a that u holds (its user handle is u's id).
func softKeyOf(t testing.TB, a *testenv.Authenticator, u *ent.User) *testenv.SoftPasskey {
	t.Helper()
	for _, pk := range a.Passkeys {
		if bytes.Equal(pk.UserHandle, u.ID[:]) {
			return pk
		}
	}
	t.Fatalf("the authenticator holds no passkey of %s", u.Username)
	return nil
}

// completeStepUp gives what up asks of u: nothing, an assertion of u's
// passkey in a, or the e-mailed link followed (read from the outbox).
func completeStepUp(t testing.TB, svc *Service, db *store.DB, a *testenv.Authenticator, u *ent.User, up *StepUp) StepUpProof {
	t.Helper()
	switch up.Method {
	case "":
		return StepUpProof{}
	case "passkey":
		return StepUpProof{ID: up.ID.String(), Credential: a.Assert(t, up.Options, softKeyOf(t, a, u))}
	}
	_, err := svc.ConfirmStepUpLink(context.Background(), stepUpToken(t, db, u))
	require.NoError(t, err)
	return StepUpProof{ID: up.ID.String()}
}

// stepUpToken is the token of the newest confirmation link mailed to u.
func stepUpToken(t testing.TB, db *store.DB, u *ent.User) string {
	t.Helper()
	m, err := db.Ent.MailMessage.Query().Where(mailmessage.ToEqualFold(u.Email), mailmessage.SubjectHasPrefix("Confirm: ")).
		Order(ent.Desc(mailmessage.FieldCreatedAt), ent.Desc(mailmessage.FieldID)).First(context.Background())
	require.NoError(t, err)
	for _, l := range MailLinks(m.Text) {
		if _, token, ok := strings.Cut(l, "/step-up/"); ok {
			return token
		}
	}
	t.Fatalf("no confirmation link in %q", m.Text)
	return ""
}

// stepUp begins the step-up req needs of u and gives it (completeStepUp).
func (h *humansEnv) stepUp(t testing.TB, a *testenv.Authenticator, u *ent.User, req StepUpRequest) StepUpProof {
	t.Helper()
	up, err := h.svc.BeginStepUp(context.Background(), &Viewer{User: u}, req)
	require.NoError(t, err)
	return completeStepUp(t, h.svc, h.env.DB, a, u, up)
}

// registerFirstPasskey gives u a passkey of a (the first needs no step-up).
func registerFirstPasskey(t testing.TB, svc *Service, a *testenv.Authenticator, u *ent.User) {
	t.Helper()
	ctx := context.Background()
	c, err := svc.BeginPasskeyRegistration(ctx, u, StepUpProof{})
	require.NoError(t, err)
	_, err = svc.FinishPasskeyRegistration(ctx, u, c.ID.String(), "Phone", a.Register(t, c.Options, 1))
	require.NoError(t, err)
}

// TestStepUpBoundToItsApproval: a passkey assertion begun for one held
// operation approves that one only. With two approvals waiting, the
// assertion made for the first is refused for the second (nothing
// changes, and the first's step-up stays unspent), then approves the
// first; approving without one, or with one spent, is refused. Card
// approvals alike.
func TestStepUpBoundToItsApproval(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	v := &Viewer{User: e.u}
	a := testenv.NewAuthenticator(testenv.AppURL)
	registerFirstPasskey(t, e.svc, a, e.u)
	e.setPolicy(t, SpendingPolicyInput{ApprovalThreshold: ptr("1")})
	first, err := e.send("2")
	require.NoError(t, err)
	second, err := e.send("3")
	require.NoError(t, err)
	firstID, secondID := first.Approval.Approval.ID.String(), second.Approval.Approval.ID.String()

	begun, err := e.svc.BeginSpendApproval(ctx, v, firstID)
	require.NoError(t, err)
	require.NotNil(t, begun.Ceremony, "a human with a passkey asserts")
	assertion := a.Assert(t, begun.Ceremony.Options, softKeyOf(t, a, e.u))
	cid := begun.Ceremony.ID.String()

	_, err = e.svc.ApproveSpendApproval(ctx, v, secondID, cid, assertion)
	require.ErrorIs(t, err, ErrStepUpInvalid, "begun for the first, it cannot approve the second")
	require.ErrorIs(t, err, ErrForbidden)
	_, err = e.svc.ApproveSpendApproval(ctx, v, secondID, "", nil)
	require.ErrorIs(t, err, ErrForbidden, "no assertion")
	for _, id := range []string{firstID, secondID} {
		cur, err := e.svc.AgentSpendApproval(ctx, e.a, id)
		require.NoError(t, err)
		require.Equal(t, "awaiting_approval", cur.Status(), "nothing changed")
		require.Empty(t, cur.ApprovedBy)
	}
	require.Zero(t, e.sentCount(t))

	got, err := e.svc.ApproveSpendApproval(ctx, v, firstID, cid, assertion)
	require.NoError(t, err, "the refusal did not spend the first's step-up")
	require.Equal(t, "approved", got.Status())
	_, err = e.svc.ApproveSpendApproval(ctx, v, secondID, cid, assertion)
	require.ErrorIs(t, err, ErrStepUpInvalid, "spent")

	// The one begun for the second approves it; through the generic begin.
	up, err := e.svc.BeginStepUp(ctx, v, StepUpRequest{Action: StepUpApproveSpend, ID: secondID})
	require.NoError(t, err)
	require.Equal(t, "passkey", up.Method)
	require.Contains(t, up.Summary, "approve "+e.a.Username+"'s send of 3.00 USDC to "+e.bob.Username)
	got, err = e.svc.ApproveSpendApproval(ctx, v, secondID, up.ID.String(), a.Assert(t, up.Options, softKeyOf(t, a, e.u)))
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status())
	require.Equal(t, 2, e.sentCount(t))

	// Card requests: the step-up of one request approves no other.
	cardA, cardB := e.request(t, e.a, "1"), e.request(t, e.a, "1")
	c, err := e.svc.BeginCardApproval(ctx, v, cardA.Request.ID.String())
	require.NoError(t, err)
	cardAssertion := a.Assert(t, c.Ceremony.Options, softKeyOf(t, a, e.u))
	_, err = e.svc.ApproveCardRequest(ctx, v, cardB.Request.ID.String(), c.Ceremony.ID.String(), cardAssertion)
	require.ErrorIs(t, err, ErrStepUpInvalid)
	require.Equal(t, CardPendingApproval, string(e.card(t, cardB.Request).Status))
	// Nor a held operation: the action is bound too.
	third, err := e.send("2")
	require.NoError(t, err)
	_, err = e.svc.ApproveSpendApproval(ctx, v, third.Approval.Approval.ID.String(), c.Ceremony.ID.String(), cardAssertion)
	require.ErrorIs(t, err, ErrStepUpInvalid)
	approved, err := e.svc.ApproveCardRequest(ctx, v, cardA.Request.ID.String(), c.Ceremony.ID.String(), cardAssertion)
	require.NoError(t, err)
	require.Equal(t, CardApproved, approved.Status())
}

// TestWithdrawStepUp: a withdrawal needs a step-up begun for exactly it.
// Without a passkey it is a link e-mailed to the account: until followed
// the withdrawal is refused, once followed it withdraws that amount to
// that address once (another amount, another user, a second use are
// refused), it lapses after StepUpLinkTTL, and at most
// MaxStepUpMailsPerHour are sent an hour. With a passkey, an assertion.
func TestWithdrawStepUp(t *testing.T) {
	e := startCardEnv(t)
	ctx := context.Background()
	w := e.withdrawer(t)
	e.fundUser(t, w, chains.Base, "20")
	to := e.externalAddress(t, chains.Base)
	req := WithdrawRequest{ToAddress: to, AmountUSD: dec("5"), Chain: "base"}
	withdrawn := func() int {
		return e.db.Ent.Transfer.Query().Where(transfer.FromUserID(w.u.ID)).CountX(ctx)
	}

	_, _, err := e.svc.Withdraw(ctx, w.v, req)
	require.ErrorIs(t, err, ErrForbidden)
	require.Contains(t, err.Error(), "confirmation link e-mailed to you")
	require.Zero(t, withdrawn(), "a stolen session alone withdraws nothing")

	// A refused request is refused before any mail.
	_, err = e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &WithdrawRequest{ToAddress: w.wallets[chains.Base], AmountUSD: dec("5")}})
	require.True(t, IsValidation(err), "%v", err)
	up, err := e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &req})
	require.NoError(t, err)
	require.Equal(t, "email", up.Method)
	require.Equal(t, w.u.Email, up.SentTo)
	require.Equal(t, e.clock.Now().UTC().Truncate(time.Microsecond).Add(StepUpLinkTTL), up.ExpiresAt)
	token := stepUpToken(t, e.db, w.u)
	link, err := e.svc.CheckStepUpLink(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "withdraw 5 USDC from your agentpay account "+w.u.Username+" to "+to+" on base", link.Summary)

	proof := StepUpProof{ID: up.ID.String()}
	req.StepUp = proof
	_, _, err = e.svc.Withdraw(ctx, w.v, req)
	require.ErrorIs(t, err, ErrStepUpUnconfirmed, "the link was not followed yet")
	_, err = e.svc.ConfirmStepUpLink(ctx, token)
	require.NoError(t, err)
	_, err = e.svc.ConfirmStepUpLink(ctx, token)
	require.ErrorIs(t, err, ErrStepUpLinkInvalid, "followed once")
	n, err := e.db.Ent.AccountEvent.Query().Where(accountevent.UserID(w.u.ID), accountevent.Kind(EventStepUpConfirmed)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the waiting page is told")
	seen, err := e.svc.StepUpOf(ctx, w.v, up.ID.String())
	require.NoError(t, err)
	require.True(t, seen.Confirmed)

	more := req
	more.AmountUSD = dec("6")
	_, _, err = e.svc.Withdraw(ctx, w.v, more)
	require.ErrorIs(t, err, ErrStepUpInvalid, "confirmed for 5, not 6")
	elsewhere := req
	elsewhere.ToAddress = e.externalAddress(t, chains.Base)
	_, _, err = e.svc.Withdraw(ctx, w.v, elsewhere)
	require.ErrorIs(t, err, ErrStepUpInvalid, "nor to another address")
	other := e.withdrawer(t)
	e.fundUser(t, other, chains.Base, "10")
	_, _, err = e.svc.Withdraw(ctx, other.v, req)
	require.ErrorIs(t, err, ErrStepUpInvalid, "nor for another account")
	require.Zero(t, withdrawn())

	res, _, err := e.svc.Withdraw(ctx, w.v, req)
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	_, _, err = e.svc.Withdraw(ctx, w.v, req)
	require.ErrorIs(t, err, ErrStepUpInvalid, "used once")
	require.Equal(t, 1, withdrawn())

	// A link lapses.
	_, err = e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &req})
	require.NoError(t, err)
	late := stepUpToken(t, e.db, w.u)
	e.clock.Advance(StepUpLinkTTL)
	_, err = e.svc.ConfirmStepUpLink(ctx, late)
	require.ErrorIs(t, err, ErrStepUpLinkInvalid)

	// At most MaxStepUpMailsPerHour mails an hour (the two above count).
	for range MaxStepUpMailsPerHour - 2 {
		_, err = e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &req})
		require.NoError(t, err)
	}
	_, err = e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &req})
	require.ErrorIs(t, err, ErrRateLimited)
	e.clock.Advance(time.Hour)
	_, err = e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &req})
	require.NoError(t, err, "an hour later")

	// With a passkey the step-up is its assertion, and no mail.
	a := testenv.NewAuthenticator(testenv.AppURL)
	registerFirstPasskey(t, e.svc, a, w.u)
	mails := e.db.Ent.MailMessage.Query().Where(mailmessage.ToEqualFold(w.u.Email)).CountX(ctx)
	up, err = e.svc.BeginStepUp(ctx, w.v, StepUpRequest{Action: StepUpWithdraw, Withdrawal: &req})
	require.NoError(t, err)
	require.Equal(t, "passkey", up.Method)
	require.Equal(t, mails, e.db.Ent.MailMessage.Query().Where(mailmessage.ToEqualFold(w.u.Email)).CountX(ctx))
	req.StepUp = StepUpProof{ID: up.ID.String(), Credential: a.Assert(t, up.Options, softKeyOf(t, a, w.u))}
	res, _, err = e.svc.Withdraw(ctx, w.v, req)
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)
	require.Equal(t, 2, withdrawn())
}

// TestPasskeyChangesNeedStepUp: adding a passkey to an account that has
// one needs an assertion of one it has; the first needs the session only.
func TestPasskeyChangesNeedStepUp(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	u := h.user(t, "pk")
	a := testenv.NewAuthenticator(testenv.AppURL)
	_, err := h.svc.BeginPasskeyRegistration(ctx, u, StepUpProof{})
	require.NoError(t, err, "the first passkey: the session is enough")
	h.registerPasskey(t, a, u, 0)

	_, err = h.svc.BeginPasskeyRegistration(ctx, u, StepUpProof{})
	require.ErrorIs(t, err, ErrForbidden, "a stolen session cannot add its own passkey")
	pkID := h.env.DB.Ent.Passkey.Query().FirstX(ctx).ID.String()
	removal := h.stepUp(t, a, u, StepUpRequest{Action: StepUpRemovePasskey, ID: pkID})
	_, err = h.svc.BeginPasskeyRegistration(ctx, u, removal)
	require.ErrorIs(t, err, ErrStepUpInvalid, "a removal's step-up adds nothing")
	c, err := h.svc.BeginPasskeyRegistration(ctx, u, h.stepUp(t, a, u, StepUpRequest{Action: StepUpAddPasskey}))
	require.NoError(t, err)
	_, err = h.svc.FinishPasskeyRegistration(ctx, u, c.ID.String(), "Laptop", a.Register(t, c.Options, 0))
	require.NoError(t, err)
	require.Len(t, h.env.DB.Ent.Passkey.Query().AllX(ctx), 2)

	// A step-up of another user's passkey is not this user's to begin.
	other := h.user(t, "other")
	_, err = h.svc.BeginStepUp(ctx, &Viewer{User: other}, StepUpRequest{Action: StepUpRemovePasskey, ID: pkID})
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, h.svc.DeletePasskey(ctx, other, pkID, removal), ErrNotFound)
	// Without a passkey, adding one needs the session only.
	up, err := h.svc.BeginStepUp(ctx, &Viewer{User: other}, StepUpRequest{Action: StepUpAddPasskey})
	require.NoError(t, err)
	require.Empty(t, up.Method)
}
