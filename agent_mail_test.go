package agentpay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/testenv"
)

// startAgentMailEnv is a humans env whose addresses take at most limit
// e-mails from agents a day.
func startAgentMailEnv(t *testing.T, limit int) *humansEnv {
	t.Helper()
	env := testenv.New(t, testenv.Options{Clock: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), Jobs: true})
	return &humansEnv{env: env, svc: newTestService(t, env, Config{AgentMailDailyLimit: limit})}
}

// One address receives at most AgentMailDailyLimit invitations and pairing
// requests a UTC day from all agents together: past it an invitation is
// refused and records nothing, a pairing request is recorded but not
// mailed. Refusals that need no count (a second invitation the same day,
// a request while one is pending) do not use the day up. The next UTC day
// counts anew.
func TestAgentMailCapPerRecipient(t *testing.T) {
	const limit = 3
	h := startAgentMailEnv(t, limit)
	ctx := context.Background()
	ann := h.user(t, "ann")

	first := h.agent(t, "bot")
	_, err := h.svc.InviteHuman(ctx, first, ann.Email)
	require.NoError(t, err)
	for range 3 {
		_, err = h.svc.InviteHuman(ctx, first, ann.Email)
		require.ErrorIs(t, err, ErrConflict, "the same agent, the same day")
	}
	pairer := h.agent(t, "pairer")
	_, err = h.svc.RequestPairing(ctx, pairer, PairingRequest{UserID: ann.ID.String()})
	require.NoError(t, err)
	for range 3 {
		_, err = h.svc.RequestPairing(ctx, pairer, PairingRequest{UserID: ann.ID.String()})
		require.ErrorIs(t, err, ErrConflict, "one pending request")
	}
	_, err = h.svc.InviteHuman(ctx, h.agent(t, "third"), ann.Email)
	require.NoError(t, err)
	require.Len(t, h.outbox(t, ann.Email), limit, "refusals did not use the day up")

	late := h.agent(t, "late")
	_, err = h.svc.InviteHuman(ctx, late, ann.Email)
	require.ErrorIs(t, err, ErrRateLimited)
	require.Contains(t, err.Error(), "3 invitation and pairing e-mails per day to this address (all agents together)")
	v, err := h.svc.RequestPairing(ctx, late, PairingRequest{UserID: ann.ID.String()})
	require.NoError(t, err, "a request is recorded past the cap")
	require.Equal(t, PairingPending, v.Status)
	require.Len(t, h.outbox(t, ann.Email), limit, "but not mailed")
	n, err := h.env.DB.Ent.Invitation.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the refused invitation recorded nothing")

	other := h.user(t, "bea")
	_, err = h.svc.InviteHuman(ctx, late, other.Email)
	require.NoError(t, err, "each address has its own cap")

	h.env.Clock.Set(h.env.Clock.Now().Add(24 * time.Hour))
	_, err = h.svc.InviteHuman(ctx, late, ann.Email)
	require.NoError(t, err, "the next UTC day counts anew")
}

// Every mail from an agent carries an unsubscribe link: reading it
// changes nothing, using it stops every agent's invitations (refused) and
// pairing-request mails (the request is recorded, unmailed); sign-in links
// still arrive. A user who denied an agent's request gets no more of that
// agent's requests by mail.
func TestAgentMailOptOuts(t *testing.T) {
	h := startAgentMailEnv(t, 0)
	ctx := context.Background()
	ann := h.user(t, "ann")
	a, b := h.agent(t, "bot"), h.agent(t, "bot2")

	_, err := h.svc.InviteHuman(ctx, a, ann.Email)
	require.NoError(t, err)
	token := "uns_" + h.mailedLink(t, ann.Email, "/unsubscribe/uns_")
	link, err := h.svc.CheckUnsubscribeLink(ctx, token)
	require.NoError(t, err)
	require.Equal(t, ann.Email, link.Email)
	require.False(t, link.Unsubscribed, "reading the link unsubscribes nobody")
	_, err = h.svc.InviteHuman(ctx, b, ann.Email)
	require.NoError(t, err)
	_, err = h.svc.CheckUnsubscribeLink(ctx, "uns_"+token[4:10]+token[4:41])
	require.ErrorIs(t, err, ErrUnsubscribeLinkInvalid)

	for range 2 {
		link, err = h.svc.Unsubscribe(ctx, token)
		require.NoError(t, err, "unsubscribing twice changes nothing more")
		require.True(t, link.Unsubscribed)
	}
	mailed := len(h.outbox(t, ann.Email))
	h.env.Clock.Set(h.env.Clock.Now().Add(24 * time.Hour))
	for _, agent := range []string{"bot3", "bot4"} {
		_, err = h.svc.InviteHuman(ctx, h.agent(t, agent), ann.Email)
		require.ErrorIs(t, err, ErrForbidden, "no agent invites an unsubscribed address")
	}
	v, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: ann.ID.String()})
	require.NoError(t, err)
	require.Equal(t, PairingPending, v.Status, "the request is recorded: the user sees it in the app")
	require.Len(t, h.outbox(t, ann.Email), mailed, "but not mailed")
	require.NoError(t, h.svc.RequestSignIn(ctx, ann.Email, "192.0.2.1"))
	require.Len(t, h.outbox(t, ann.Email), mailed+1, "sign-in links still arrive")

	// A denied request: that agent's next requests are not mailed, another
	// agent's are.
	bea := h.user(t, "bea")
	p, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: bea.ID.String()})
	require.NoError(t, err)
	require.Len(t, h.outbox(t, bea.Email), 1)
	_, err = h.svc.DecidePairing(ctx, bea, p.Pairing.ID.String(), DenyPairing)
	require.NoError(t, err)
	_, err = h.svc.RequestPairing(ctx, a, PairingRequest{UserID: bea.ID.String()})
	require.NoError(t, err)
	require.Len(t, h.outbox(t, bea.Email), 1, "the agent whose request was denied mails no more")
	_, err = h.svc.RequestPairing(ctx, b, PairingRequest{UserID: bea.ID.String()})
	require.NoError(t, err)
	require.Len(t, h.outbox(t, bea.Email), 2)
}
