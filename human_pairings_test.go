package agentpay

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/accountevent"
)

func (h *humansEnv) kindsOf(t *testing.T, of Party) []string {
	t.Helper()
	var kinds []string
	for _, ev := range h.events(t, of) {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

// TestStrangerWithInviteCodeCannotFreezeTheAgent: the attack of issue 23,
// item 11. A stranger who got hold of an agent's invite code accepts it to
// set a per-payment cap of 0.000001 USD on the agent. The agent has a
// human already, so the stranger's pairing waits for that human's consent
// and gives the stranger no standing: the cap is refused and the agent
// keeps paying. The code is spent (the agent has a new one); the human is
// asked, refuses, and the stranger stays out. An agent without a human
// whose code leaks gets its stranger as first human; the agent revokes the
// pairing and the stranger's policy stops applying at once.
func TestStrangerWithInviteCodeCannotFreezeTheAgent(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := context.Background()
	ana := e.u
	stranger, err := e.svc.CreateUser(ctx, NewUser{Email: randomName(t, "s") + "@example.com", Username: randomName(t, "s")})
	require.NoError(t, err)
	code := e.a.InviteCode
	freeze := SpendingPolicyInput{PerPaymentCap: ptr("0.000001")}

	pv, err := e.svc.AcceptInvitation(ctx, stranger, code)
	require.NoError(t, err)
	require.Equal(t, PairingAwaitingConsent, pv.Status)
	_, err = e.svc.SetSpendingPolicy(ctx, &Viewer{User: stranger}, e.a.Username, freeze)
	require.ErrorIs(t, err, ErrNotFound, "no standing without consent")
	res, err := e.send("1")
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status, "the agent is not frozen")

	// The code worked once: the agent has a new one.
	require.NotEqual(t, code, e.agent(t, e.a).InviteCode)
	late, err := e.svc.CreateUser(ctx, NewUser{Email: randomName(t, "l") + "@example.com", Username: randomName(t, "l")})
	require.NoError(t, err)
	_, err = e.svc.AcceptInvitation(ctx, late, code)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = e.svc.Invitation(ctx, code)
	require.ErrorIs(t, err, ErrNotFound)

	// Ana is asked (an event and an e-mail), the agent told; the stranger
	// cannot consent for themselves.
	asks, err := e.svc.PairingConsentRequests(ctx, ana)
	require.NoError(t, err)
	require.Len(t, asks, 1)
	require.Equal(t, stranger.ID, asks[0].User.ID)
	n, err := e.db.Ent.AccountEvent.Query().Where(accountevent.UserID(ana.ID), accountevent.Kind(EventPairingConsentRequested)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Positive(t, e.db.Ent.MailMessage.Query().CountX(ctx))
	n, err = e.db.Ent.AccountEvent.Query().Where(accountevent.AgentID(e.a.ID), accountevent.Kind(EventPairingAwaitingConsent)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = e.svc.DecidePairingConsent(ctx, stranger, pv.Pairing.ID.String(), ApprovePairing)
	require.ErrorIs(t, err, ErrNotFound)

	denied, err := e.svc.DecidePairingConsent(ctx, ana, pv.Pairing.ID.String(), DenyPairing)
	require.NoError(t, err)
	require.Equal(t, PairingDenied, denied.Status)
	_, err = e.svc.SetSpendingPolicy(ctx, &Viewer{User: stranger}, e.a.Username, freeze)
	require.ErrorIs(t, err, ErrNotFound)
	n, err = e.db.Ent.AccountEvent.Query().Where(accountevent.UserID(stranger.ID), accountevent.Kind(EventPairingDenied)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the stranger is told")
	res, err = e.send("1")
	require.NoError(t, err)
	require.Equal(t, "completed", res.Status)

	// An agent without a human: whoever has its code becomes its first
	// human, and the agent can end that at once.
	lone := e.register(t, "lone")
	e.fund(t, lone, "base", "5")
	first, err := e.svc.AcceptInvitation(ctx, stranger, e.agent(t, lone).InviteCode)
	require.NoError(t, err)
	require.Equal(t, PairingApproved, first.Status)
	_, err = e.svc.SetSpendingPolicy(ctx, &Viewer{User: stranger}, lone.Username, freeze)
	require.NoError(t, err)
	_, _, err = e.svc.Send(ctx, lone, SendRequest{ToUsername: e.bob.Username, AmountUSD: dec("1"), Chain: "base"})
	require.ErrorIs(t, err, ErrForbidden, "frozen by the stranger's cap")
	revoked, err := e.svc.RevokeAgentPairing(ctx, lone, first.Pairing.ID.String())
	require.NoError(t, err)
	require.Equal(t, PairingRevoked, revoked.Status)
	sent, _, err := e.svc.Send(ctx, lone, SendRequest{ToUsername: e.bob.Username, AmountUSD: dec("1"), Chain: "base"})
	require.NoError(t, err, "the revoked human's policy no longer applies")
	require.Equal(t, "completed", sent.Status)
	n, err = e.db.Ent.AccountEvent.Query().Where(accountevent.UserID(stranger.ID), accountevent.Kind(EventPairingRevoked)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the human is told")
}

// TestPairingConsent: a second human joins an agent once one of its humans
// consents; the newcomer and the agent are told; a consent lapses after
// PairingRequestTTL; nobody else consents.
func TestPairingConsent(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a, ana, bo, eve := h.agent(t, "bot"), h.user(t, "ana"), h.user(t, "bo"), h.user(t, "eve")
	pair := func(u *ent.User) *PairingView {
		t.Helper()
		p, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
		require.NoError(t, err)
		v, err := h.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), ApprovePairing)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, PairingApproved, pair(ana).Status, "the first human needs no consent")
	v := pair(bo)
	require.Equal(t, PairingAwaitingConsent, v.Status)
	require.NotNil(t, v.Pairing.ExpiresAt)
	mine, err := h.svc.UserPairings(ctx, bo)
	require.NoError(t, err)
	require.Equal(t, PairingAwaitingConsent, mine[0].Status)

	_, err = h.svc.DecidePairingConsent(ctx, eve, v.Pairing.ID.String(), ApprovePairing)
	require.ErrorIs(t, err, ErrNotFound, "eve is not the agent's human")
	_, err = h.svc.DecidePairingConsent(ctx, ana, v.Pairing.ID.String(), RevokePairing)
	requireHumanRefusal(t, err, errInvalid)
	got, err := h.svc.DecidePairingConsent(ctx, ana, v.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	require.Equal(t, PairingApproved, got.Status)
	_, err = h.svc.DecidePairingConsent(ctx, ana, v.Pairing.ID.String(), DenyPairing)
	require.ErrorIs(t, err, ErrConflict, "decided once")
	require.Equal(t, []string{EventPairingApproved, EventPairingAwaitingConsent, EventPairingApproved}, h.kindsOf(t, AgentParty(a.ID)))
	require.Contains(t, h.kindsOf(t, UserParty(bo.ID)), EventPairingApproved)

	// Either human may consent to a third; one unanswered lapses.
	v = pair(eve)
	require.Equal(t, PairingAwaitingConsent, v.Status)
	asks, err := h.svc.PairingConsentRequests(ctx, bo)
	require.NoError(t, err)
	require.Len(t, asks, 1, "bo is asked too")
	h.env.Clock.Set(h.env.Clock.Now().Add(PairingRequestTTL))
	ps, err := h.svc.UserPairings(ctx, eve)
	require.NoError(t, err)
	require.Equal(t, PairingExpired, ps[0].Status)
	_, err = h.svc.DecidePairingConsent(ctx, bo, v.Pairing.ID.String(), ApprovePairing)
	require.ErrorIs(t, err, ErrConflict)
	asks, err = h.svc.PairingConsentRequests(ctx, bo)
	require.NoError(t, err)
	require.Empty(t, asks)
}

// TestFirstHumanRace: two humans saying yes to one agent at once cannot
// both be its first human: one is approved, the other waits for consent.
// One invite code accepted by two at once pairs one of them.
func TestFirstHumanRace(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		a := h.agent(t, "bot")
		us := []*ent.User{h.user(t, "u1"), h.user(t, "u2")}
		ids := make([]string, 2)
		for i, u := range us {
			p, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
			require.NoError(t, err)
			ids[i] = p.Pairing.ID.String()
		}
		statuses := make([]string, 2)
		var wg sync.WaitGroup
		for i, u := range us {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := h.svc.DecidePairing(ctx, u, ids[i], ApprovePairing)
				require.NoError(t, err)
				statuses[i] = v.Status
			}()
		}
		wg.Wait()
		require.ElementsMatch(t, []string{PairingApproved, PairingAwaitingConsent}, statuses)

		b := h.agent(t, "coded")
		var ok, refused int
		var mu sync.Mutex
		for _, u := range []*ent.User{h.user(t, "x1"), h.user(t, "x2")} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := h.svc.AcceptInvitation(ctx, u, b.InviteCode)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrNotFound):
					refused++
				default:
					t.Errorf("unexpected: %v", err)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1, ok, "the code pairs one")
		require.Equal(t, 1, refused)
	}
}

// TestAgentRevokesPairing: the agent ends any of its pairings (approved,
// pending, awaiting consent); the human is told; another agent's, or one
// ended, cannot be.
func TestAgentRevokesPairing(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a, other := h.agent(t, "bot"), h.agent(t, "other")
	ana, bo, cy := h.user(t, "ana"), h.user(t, "bo"), h.user(t, "cy")
	p, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: ana.ID.String()})
	require.NoError(t, err)
	approved, err := h.svc.DecidePairing(ctx, ana, p.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	pending, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: bo.ID.String()})
	require.NoError(t, err)
	awaiting, err := h.svc.AcceptInvitation(ctx, cy, a.InviteCode)
	require.NoError(t, err)
	require.Equal(t, PairingAwaitingConsent, awaiting.Status)

	_, err = h.svc.RevokeAgentPairing(ctx, other, approved.Pairing.ID.String())
	require.ErrorIs(t, err, ErrNotFound, "another agent's pairing")
	_, err = h.svc.RevokeAgentPairing(ctx, a, "nope")
	require.ErrorIs(t, err, ErrNotFound)
	for _, v := range []*PairingView{approved, pending, awaiting} {
		got, err := h.svc.RevokeAgentPairing(ctx, a, v.Pairing.ID.String())
		require.NoError(t, err)
		require.Equal(t, PairingRevoked, got.Status)
		require.Contains(t, h.kindsOf(t, UserParty(v.User.ID)), EventPairingRevoked)
	}
	_, err = h.svc.RevokeAgentPairing(ctx, a, approved.Pairing.ID.String())
	require.ErrorIs(t, err, ErrConflict, "revoked once")
	_, err = h.svc.DecidePairingConsent(ctx, ana, awaiting.Pairing.ID.String(), ApprovePairing)
	require.ErrorIs(t, err, ErrNotFound, "ana is no longer the agent's human")
	ps, err := h.svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	for _, p := range ps {
		require.Equal(t, PairingRevoked, p.Status)
	}
}
