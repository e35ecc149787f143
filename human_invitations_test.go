package agentpay

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/vault"
)

// The takeover of issue 23, played by the service's rules: an agent invites
// a merchant's confirmed contact address and uses everything it is
// answered. It gets no account with that address (verified or not), cannot
// accept the invitation with an account of its own, and owns nothing; the
// address's holder, with the link from the e-mail, gets both.
func TestAgentInvitationCannotTakeOverAMerchant(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	const contact = "owner@shop.test"
	shop := h.merchantOf(t, contact).Merchant
	mallory := h.agent(t, "mallory")

	inv, err := h.svc.InviteHuman(ctx, mallory, contact)
	require.NoError(t, err)
	emailed := h.invitationToken(t, contact)
	require.NotContains(t, inv.URL+inv.Message, emailed, "the e-mailed token is not in the agent's answer")
	require.NotContains(t, inv.URL, "inv_", "nor any invitation token")
	got := strings.TrimPrefix(inv.URL, h.svc.cfg.AppURL+"/invite/")
	require.NotEqual(t, inv.URL, got, "still a page of the app's /invite/")

	// Signing up with what the agent got, or with its own invite code:
	// refused, no account made.
	for _, token := range []string{got, mallory.InviteCode} {
		_, _, err = h.svc.SignUpByInvitation(ctx, token, NewUser{Username: randomName(t, "mal")}, "attacker")
		require.ErrorIs(t, err, ErrConflict, token)
	}
	_, err = h.svc.UserByEmail(ctx, contact)
	require.ErrorIs(t, err, ErrNotFound, "no account for the invited address")

	// Accepting it with an account of the agent's own (its own verified
	// address) through the reference: refused; that account owns nothing.
	accomplice := h.user(t, "accomplice")
	_, err = h.svc.AcceptInvitation(ctx, accomplice, got)
	require.ErrorIs(t, err, ErrForbidden)
	ms, err := h.svc.MerchantsOf(ctx, h.viewer(t, accomplice))
	require.NoError(t, err)
	require.Empty(t, ms)

	// The address's holder follows the e-mailed link: a verified account,
	// paired, and the merchant's owner.
	in, view, err := h.svc.SignUpByInvitation(ctx, emailed, NewUser{Username: randomName(t, "owner")}, "owner")
	require.NoError(t, err)
	require.Equal(t, contact, in.User.Email)
	require.NotNil(t, in.User.EmailVerifiedAt)
	require.Equal(t, PairingApproved, view.Status)
	ms, err = h.svc.MerchantsOf(ctx, h.viewer(t, in.User))
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, shop.ID, ms[0].Merchant.ID)
	require.Equal(t, RoleOwner, ms[0].Role)
}

// An invitation's reference (what the agent is answered) is accepted only
// by an account whose verified address is the invited one.
func TestAcceptInvitationByReference(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a := h.agent(t, "bot")
	ann := h.user(t, "ann")
	inv, err := h.svc.InviteHuman(ctx, a, ann.Email)
	require.NoError(t, err)
	ref := inv.Invitation.ID.String()

	unverified, err := h.svc.CreateUser(ctx, NewUser{Email: "un@example.com", Username: randomName(t, "un")})
	require.NoError(t, err)
	require.Nil(t, unverified.EmailVerifiedAt, "made without an e-mailed link: unverified")
	other, err := h.svc.InviteHuman(ctx, a, unverified.Email)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		u    *ent.User
		ref  string
	}{
		{"another address", h.user(t, "eve"), ref},
		{"the invited address, unverified", unverified, other.Invitation.ID.String()},
	} {
		_, err := h.svc.AcceptInvitation(ctx, tc.u, tc.ref)
		require.ErrorIs(t, err, ErrForbidden, tc.name)
	}
	for _, bad := range []string{strings.ToUpper(ref), "{" + ref + "}", "urn:uuid:" + ref} {
		_, err := h.svc.Invitation(ctx, bad)
		require.ErrorIs(t, err, ErrNotFound, "only the canonical form names it: %s", bad)
	}

	pv, err := h.svc.AcceptInvitation(ctx, ann, ref)
	require.NoError(t, err)
	require.Equal(t, PairingApproved, pv.Status)
	require.Equal(t, inv.Invitation.ID, *pv.Pairing.InvitationID)
}

// Declining from the e-mailed link: the invitation cannot be accepted, its
// agent cannot invite the address again (another agent still may), and
// only the e-mailed link declines.
func TestDeclineInvitation(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a, b := h.agent(t, "bot"), h.agent(t, "bot2")
	inv, err := h.svc.InviteHuman(ctx, a, "ann@example.com")
	require.NoError(t, err)
	token := h.invitationToken(t, "ann@example.com")

	_, err = h.svc.DeclineInvitation(ctx, inv.Invitation.ID.String())
	require.ErrorIs(t, err, ErrConflict, "the agent's reference cannot decline for the address")
	_, err = h.svc.DeclineInvitation(ctx, vault.InvitationToken.New())
	require.ErrorIs(t, err, ErrNotFound)

	for range 2 {
		info, err := h.svc.DeclineInvitation(ctx, token)
		require.NoError(t, err, "declining twice changes nothing more")
		require.Equal(t, a.ID, info.Agent.ID)
	}
	_, err = h.svc.Invitation(ctx, token)
	require.ErrorIs(t, err, ErrConflict)
	_, _, err = h.svc.SignUpByInvitation(ctx, token, NewUser{Username: randomName(t, "ann")}, "")
	require.ErrorIs(t, err, ErrConflict, "a declined invitation signs nobody up")

	h.env.Clock.Set(h.env.Clock.Now().Add(InvitationTTL * 2))
	_, err = h.svc.InviteHuman(ctx, a, "ann@example.com")
	require.ErrorIs(t, err, ErrForbidden, "the agent cannot invite the address again, any day")
	require.Contains(t, err.Error(), "does not accept invitations from you")
	_, err = h.svc.InviteHuman(ctx, b, "ann@example.com")
	require.NoError(t, err, "another agent may")

	// An accepted invitation is not declined.
	_, err = h.svc.InviteHuman(ctx, a, "bea@example.com")
	require.NoError(t, err)
	bea := h.invitationToken(t, "bea@example.com")
	_, _, err = h.svc.SignUpByInvitation(ctx, bea, NewUser{Username: randomName(t, "bea")}, "")
	require.NoError(t, err)
	_, err = h.svc.DeclineInvitation(ctx, bea)
	require.ErrorIs(t, err, ErrConflict)
}

// An account made without an e-mailed link has an unverified address: it
// owns no merchant until the address signs in by an e-mailed link, which
// verifies it and ends what was set up on the account before (its other
// browser sessions, its passkeys).
func TestUnverifiedAddressProvedBySignIn(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	const contact = "shop@example.com"
	shop := h.merchantOf(t, contact).Merchant
	u, err := h.svc.CreateUser(ctx, NewUser{Email: contact, Username: randomName(t, "shop")})
	require.NoError(t, err)
	require.Nil(t, u.EmailVerifiedAt)
	before := h.viewer(t, u)
	ms, err := h.svc.MerchantsOf(ctx, before)
	require.NoError(t, err)
	require.Empty(t, ms, "an unverified address owns nothing")
	_, err = h.svc.OpenDashboard(ctx, before, shop.ID, ModeLive)
	require.ErrorIs(t, err, ErrForbidden)
	pk, err := h.env.DB.Ent.Passkey.Create().SetUserID(u.ID).SetCredentialID([]byte("cred")).SetPublicKey([]byte("pk")).
		SetName("set up before the proof").SetFlags(0).SetSignCount(0).SetCreatedAt(h.svc.now()).SetUpdatedAt(h.svc.now()).Save(ctx)
	require.NoError(t, err)

	require.NoError(t, h.svc.RequestSignIn(ctx, contact, "192.0.2.1"))
	in, err := h.svc.CompleteSignIn(ctx, h.signInLink(t, contact), nil, "mailbox")
	require.NoError(t, err)
	require.Equal(t, u.ID, in.User.ID)
	require.NotNil(t, in.User.EmailVerifiedAt, "the e-mailed sign-in proves the address")
	_, err = h.svc.AuthenticateBrowser(ctx, before.token)
	require.ErrorIs(t, err, ErrNotSignedIn, "sessions opened before the proof end")
	_, err = h.env.DB.Ent.Passkey.Get(ctx, pk.ID)
	require.True(t, ent.IsNotFound(err), "passkeys added before the proof are removed")

	after, err := h.svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	ms, err = h.svc.MerchantsOf(ctx, after)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, RoleOwner, ms[0].Role)
}
