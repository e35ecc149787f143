package agentpay

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/ent/transfer"
	"agentpay/ent/wallet"
	"agentpay/internal/testenv"
)

// humansEnv is a service without chains, a clock the test moves, and
// helpers to make agents and users.
type humansEnv struct {
	env *testenv.Env
	svc *Service
}

func startHumansEnv(t testing.TB) *humansEnv {
	t.Helper()
	env := testenv.New(t, testenv.Options{Clock: time.Now(), Jobs: true})
	return &humansEnv{env: env, svc: newTestService(t, env, Config{})}
}

func (h *humansEnv) agent(t *testing.T, prefix string) *ent.Agent {
	t.Helper()
	reg, err := h.svc.QuickRegister(context.Background(), randomName(t, prefix))
	require.NoError(t, err)
	return reg.Agent
}

func (h *humansEnv) user(t testing.TB, prefix string) *ent.User {
	t.Helper()
	name := randomName(t, prefix)
	u, err := h.svc.CreateUser(context.Background(), NewUser{Email: name + "@Example.com", Username: name, DisplayName: "Ann " + prefix, EmailVerified: true})
	require.NoError(t, err)
	return u
}

// invitationToken is the token of the newest invitation link mailed to an
// address (only the e-mail carries it).
func (h *humansEnv) invitationToken(t *testing.T, to string) string {
	t.Helper()
	return "inv_" + h.mailedLink(t, to, "/invite/inv_")
}

// mailedLink is what follows {app_url}+prefix in the newest link of that
// form mailed to an address.
func (h *humansEnv) mailedLink(t testing.TB, to, prefix string) string {
	t.Helper()
	prefix = h.svc.cfg.AppURL + prefix
	for _, m := range h.outbox(t, to) {
		for _, l := range MailLinks(m.Text) {
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
		}
	}
	require.Fail(t, "no "+prefix+" link mailed to "+to)
	return ""
}

// outbox is the mail queued to an address, newest first.
func (h *humansEnv) outbox(t testing.TB, to string) []*ent.MailMessage {
	t.Helper()
	ms, err := h.env.DB.Ent.MailMessage.Query().Where(mailmessage.ToEqualFold(to)).
		Order(ent.Desc(mailmessage.FieldCreatedAt), ent.Desc(mailmessage.FieldID)).All(context.Background())
	require.NoError(t, err)
	return ms
}

func (h *humansEnv) events(t *testing.T, of Party) []AccountEvent {
	t.Helper()
	evs, err := h.svc.AccountEvents(context.Background(), of, 0, nil)
	require.NoError(t, err)
	return evs
}

// errInvalid stands for a ValidationError in the tables (requireHumanRefusal).
var errInvalid = errors.New("validation error")

// requireHumanRefusal checks err is want (errInvalid: a ValidationError).
func requireHumanRefusal(t *testing.T, err, want error) {
	t.Helper()
	if want == errInvalid {
		require.True(t, IsValidation(err), "want a validation error, got %v", err)
		return
	}
	require.ErrorIs(t, err, want)
}

func TestCreateUser(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	u := h.user(t, "ann")
	require.Equal(t, strings.ToLower(u.Username+"@example.com"), u.Email, "addresses are kept lower-cased")
	require.NotNil(t, u.EmailVerifiedAt)
	require.Equal(t, "not_started", string(u.IdentityStatus))
	ws, err := h.svc.UserWallets(ctx, u)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	require.Equal(t, string(chains.Solana), ws[0].Chain)
	require.Equal(t, string(chains.Base), ws[1].Chain)
	for _, w := range ws {
		require.Equal(t, wallet.KindCustodial, w.Kind)
		require.NotEmpty(t, w.EncryptedKey)
		require.Equal(t, u.ID, *w.UserID)
	}

	// One namespace with agents: a user cannot take an agent's name, nor
	// an agent a user's, and check-username answers for both.
	a := h.agent(t, "bot")
	for _, tc := range []struct {
		name string
		in   NewUser
		want error
	}{
		{"an agent's username", NewUser{Email: "x1@example.com", Username: a.Username}, ErrConflict},
		{"a user's username", NewUser{Email: "x2@example.com", Username: u.Username}, ErrConflict},
		{"an address with an account, other capitals", NewUser{Email: strings.ToUpper(u.Email), Username: "fresh_name1"}, ErrConflict},
		{"bad username", NewUser{Email: "x3@example.com", Username: "_bad"}, errInvalid},
		{"bad address", NewUser{Email: "not an address", Username: "fresh_name2"}, errInvalid},
		{"long display name", NewUser{Email: "x4@example.com", Username: "fresh_name3", DisplayName: strings.Repeat("é", 101)}, errInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.CreateUser(ctx, tc.in)
			requireHumanRefusal(t, err, tc.want)
		})
	}
	_, err = h.svc.QuickRegister(ctx, u.Username)
	require.ErrorIs(t, err, ErrConflict, "an agent cannot take a user's name")
	free, err := h.svc.CheckUsername(ctx, u.Username)
	require.NoError(t, err)
	require.False(t, free)
	n, err := h.env.DB.Ent.User.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "refusals change nothing")
}

// TestUsernameRaceAgentAndUser: an agent and a user registering one name
// at once: exactly one gets it.
func TestUsernameRaceAgentAndUser(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	for i := range 5 {
		name := randomName(t, "race")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); _, errs[0] = h.svc.QuickRegister(ctx, name) }()
		go func() {
			defer wg.Done()
			_, errs[1] = h.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
		}()
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				require.ErrorIs(t, err, ErrConflict, "round %d", i)
			}
		}
		require.Equal(t, 1, won, "round %d: %v", i, errs)
	}
}

func TestPairingLifecycle(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a, u := h.agent(t, "bot"), h.user(t, "ann")

	// Refusals change nothing.
	for _, tc := range []struct {
		name string
		in   PairingRequest
		want error
	}{
		{"no user id", PairingRequest{}, errInvalid},
		{"malformed user id", PairingRequest{UserID: "42"}, errInvalid},
		{"unknown user", PairingRequest{UserID: "6f1c2a52-0000-4000-8000-000000000000"}, ErrNotFound},
		{"long message", PairingRequest{UserID: u.ID.String(), Message: strings.Repeat("x", 501)}, errInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.RequestPairing(ctx, a, tc.in)
			requireHumanRefusal(t, err, tc.want)
		})
	}
	ps, err := h.svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	require.Empty(t, ps)

	v, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String(), Message: strings.Repeat("é", 500)})
	require.NoError(t, err)
	require.Equal(t, PairingPending, v.Status)
	require.NotNil(t, v.Pairing.ExpiresAt)
	_, err = h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.ErrorIs(t, err, ErrConflict, "one pending pairing per user")
	userEvents := h.events(t, UserParty(u.ID))
	require.Len(t, userEvents, 1)
	mails := h.outbox(t, u.Email)
	require.Len(t, mails, 1, "the user is e-mailed")
	require.Contains(t, mails[0].Text, a.Username)
	links := MailLinks(mails[0].Text)
	require.Len(t, links, 2)
	require.Equal(t, h.svc.cfg.AppURL+"/#pairings", links[0])
	require.True(t, strings.HasPrefix(links[1], h.svc.cfg.AppURL+"/unsubscribe/uns_"), "mail from agents can be stopped: %s", links[1])
	require.Equal(t, EventPairingRequested, userEvents[0].Kind)
	require.Contains(t, string(userEvents[0].Data), a.Username)

	// Another user cannot decide it; an unknown move is refused.
	other := h.user(t, "eve")
	_, err = h.svc.DecidePairing(ctx, other, v.Pairing.ID.String(), ApprovePairing)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = h.svc.DecidePairing(ctx, u, v.Pairing.ID.String(), RevokePairing)
	require.ErrorIs(t, err, ErrConflict, "only an approved pairing is revoked")

	got, err := h.svc.DecidePairing(ctx, u, v.Pairing.ID.String(), ApprovePairing)
	require.NoError(t, err)
	require.Equal(t, PairingApproved, got.Status)
	require.NotNil(t, got.Pairing.DecidedAt)
	require.Nil(t, got.Pairing.ExpiresAt)
	_, err = h.svc.DecidePairing(ctx, u, v.Pairing.ID.String(), DenyPairing)
	require.ErrorIs(t, err, ErrConflict, "decided once")
	_, err = h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.ErrorIs(t, err, ErrConflict, "an approved pairing exists")

	got, err = h.svc.DecidePairing(ctx, u, v.Pairing.ID.String(), RevokePairing)
	require.NoError(t, err)
	require.Equal(t, PairingRevoked, got.Status)

	agentEvents := h.events(t, AgentParty(a.ID))
	require.Len(t, agentEvents, 2)
	require.Equal(t, EventPairingApproved, agentEvents[0].Kind)
	require.Equal(t, EventPairingRevoked, agentEvents[1].Kind)
	require.Less(t, agentEvents[0].ID, agentEvents[1].ID)

	// A new request after the revoke; it lapses after 7 days unanswered.
	h.env.Clock.Set(h.env.Clock.Now().Add(time.Second))
	v2, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	h.env.Clock.Set(h.env.Clock.Now().Add(PairingRequestTTL))
	ps, err = h.svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, v2.Pairing.ID, ps[0].Pairing.ID, "newest first")
	require.Equal(t, PairingExpired, ps[0].Status)
	require.Equal(t, PairingRevoked, ps[1].Status)
	_, err = h.svc.DecidePairing(ctx, u, v2.Pairing.ID.String(), ApprovePairing)
	require.ErrorIs(t, err, ErrConflict, "an expired request cannot be approved")
	_, err = h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err, "an expired request does not block a new one")

	// The user sees the same pairings, with the agent.
	mine, err := h.svc.UserPairings(ctx, u)
	require.NoError(t, err)
	require.Len(t, mine, 3)
	require.Equal(t, []string{PairingPending, PairingExpired, PairingRevoked}, []string{mine[0].Status, mine[1].Status, mine[2].Status})
	require.Equal(t, a.Username, mine[0].Agent.Username)
}

// TestConcurrentPairingRequests: requests racing for one user make one
// pending pairing.
func TestConcurrentPairingRequests(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a, u := h.agent(t, "bot"), h.user(t, "ann")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, ErrConflict)
		}
	}
	require.Equal(t, 1, ok)
	require.Len(t, h.events(t, UserParty(u.ID)), 1)
}

func TestInvitations(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a := h.agent(t, "bot")

	_, err := h.svc.InviteHuman(ctx, a, "not-an-address")
	requireHumanRefusal(t, err, errInvalid)

	inv, err := h.svc.InviteHuman(ctx, a, " Ann@Example.com ")
	require.NoError(t, err)
	require.Equal(t, "ann@example.com", inv.Invitation.Email)
	require.Equal(t, h.svc.cfg.AppURL+"/invite/"+inv.Invitation.ID.String(), inv.URL, "the agent gets the invitation's reference")
	token := h.invitationToken(t, "ann@example.com")
	require.NotContains(t, string(inv.Invitation.TokenHash), token, "the token is stored hashed")
	require.NotContains(t, inv.URL+inv.Message, token, "the e-mailed token is never in the agent's answer")
	mails := h.outbox(t, "ann@example.com")
	require.Len(t, mails, 1)
	require.Contains(t, mails[0].Subject, a.Username)
	links := MailLinks(mails[0].Text)
	require.Len(t, links, 2, "the invitation's link and the unsubscribe link")
	require.Equal(t, h.svc.cfg.AppURL+"/invite/"+token, links[0], "the e-mail carries the link")
	require.True(t, strings.HasPrefix(links[1], h.svc.cfg.AppURL+"/unsubscribe/uns_"), links[1])
	require.Contains(t, mails[0].HTML, links[0])
	require.Contains(t, mails[0].HTML, links[1])

	_, err = h.svc.InviteHuman(ctx, a, "ann@example.com")
	require.ErrorIs(t, err, ErrConflict, "once per address per agent per UTC day")
	other := h.agent(t, "bot2")
	_, err = h.svc.InviteHuman(ctx, other, "ann@example.com")
	require.NoError(t, err, "another agent may invite the address")

	info, err := h.svc.Invitation(ctx, token)
	require.NoError(t, err)
	require.Equal(t, a.ID, info.Agent.ID)
	require.Equal(t, "ann@example.com", info.Email())
	_, err = h.svc.Invitation(ctx, "inv_"+strings.Repeat("A", 43))
	require.ErrorIs(t, err, ErrNotFound)

	ref, err := h.svc.Invitation(ctx, inv.Invitation.ID.String())
	require.NoError(t, err, "the reference names the invitation")
	require.True(t, ref.Reference)
	require.Equal(t, "ann@example.com", ref.Email())
	_, _, err = h.svc.SignUpByInvitation(ctx, inv.Invitation.ID.String(), NewUser{Username: randomName(t, "ann")}, "test")
	require.ErrorIs(t, err, ErrConflict, "the reference signs nobody up")

	// Sign up through the link: the account has the invited address,
	// verified, and an approved pairing with the agent at once.
	in, view, err := h.svc.SignUpByInvitation(ctx, token, NewUser{Username: randomName(t, "ann"), Email: "ignored@example.com"}, "test")
	require.NoError(t, err)
	u := in.User
	require.NotNil(t, u.EmailVerifiedAt, "the e-mailed link proves the address")
	v, err := h.svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err, "signed in by signing up")
	require.Equal(t, u.ID, v.User.ID)
	require.Equal(t, "ann@example.com", u.Email)
	require.Equal(t, PairingApproved, view.Status)
	require.Equal(t, inv.Invitation.ID, *view.Pairing.InvitationID)
	ps, err := h.svc.AgentPairings(ctx, a)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, PairingApproved, ps[0].Status)
	evs := h.events(t, AgentParty(a.ID))
	require.Len(t, evs, 1)
	require.Equal(t, EventPairingApproved, evs[0].Kind)

	// Accepting again changes nothing; another account cannot accept it.
	again, err := h.svc.AcceptInvitation(ctx, u, token)
	require.NoError(t, err)
	require.Equal(t, view.Pairing.ID, again.Pairing.ID)
	eve := h.user(t, "eve")
	_, err = h.svc.AcceptInvitation(ctx, eve, token)
	require.ErrorIs(t, err, ErrConflict)
	_, _, err = h.svc.SignUpByInvitation(ctx, token, NewUser{Username: randomName(t, "eve")}, "")
	require.ErrorIs(t, err, ErrConflict, "the address has an account")

	// The agent's own invite code works the same way, without an address.
	pv, err := h.svc.AcceptInvitation(ctx, eve, other.InviteCode)
	require.NoError(t, err)
	require.Equal(t, PairingApproved, pv.Status)
	require.Nil(t, pv.Pairing.InvitationID)

	// A pending request is approved by accepting the invitation.
	bot3 := h.agent(t, "bot3")
	_, err = h.svc.RequestPairing(ctx, bot3, PairingRequest{UserID: eve.ID.String()})
	require.NoError(t, err)
	pv, err = h.svc.AcceptInvitation(ctx, eve, bot3.InviteCode)
	require.NoError(t, err)
	ps, err = h.svc.AgentPairings(ctx, bot3)
	require.NoError(t, err)
	require.Len(t, ps, 1, "the request itself was approved")
	require.Equal(t, PairingApproved, ps[0].Status)
	require.Equal(t, pv.Pairing.ID, ps[0].Pairing.ID)

	// An invitation lapses after 7 days.
	_, err = h.svc.InviteHuman(ctx, bot3, "late@example.com")
	require.NoError(t, err)
	late := h.invitationToken(t, "late@example.com")
	h.env.Clock.Set(h.env.Clock.Now().Add(InvitationTTL))
	_, err = h.svc.Invitation(ctx, late)
	require.ErrorIs(t, err, ErrConflict)
}

// TestConcurrentInvitations: one address invited by one agent at once
// makes one invitation.
func TestConcurrentInvitations(t *testing.T) {
	h := startHumansEnv(t)
	ctx := context.Background()
	a := h.agent(t, "bot")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.svc.InviteHuman(ctx, a, "ann@example.com")
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			require.True(t, errors.Is(err, ErrConflict), "%v", err)
		}
	}
	require.Equal(t, 1, ok)
	n, err := h.env.DB.Ent.Invitation.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, h.outbox(t, "ann@example.com"), 1, "one e-mail")
}

func TestWatchAccountEvents(t *testing.T) {
	h := startHumansEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, u := h.agent(t, "bot"), h.user(t, "ann")
	v, err := h.svc.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)

	// From now: the earlier request is not replayed.
	uv := h.viewer(t, u)
	live, err := h.svc.WatchViewerEvents(ctx, uv, nil)
	require.NoError(t, err)
	agentLive, err := h.svc.WatchAgentEvents(ctx, a, nil)
	require.NoError(t, err)
	// From the start: replayed.
	var zero int64
	replay, err := h.svc.WatchViewerEvents(ctx, uv, &zero)
	require.NoError(t, err)
	ev := <-replay
	require.Equal(t, EventPairingRequested, ev.Kind)

	_, err = h.svc.DecidePairing(ctx, u, v.Pairing.ID.String(), DenyPairing)
	require.NoError(t, err)
	select {
	case ev := <-agentLive:
		require.Equal(t, EventPairingDenied, ev.Kind)
	case <-ctx.Done():
		t.Fatal("the agent did not hear the denial")
	}
	b := h.agent(t, "bot2")
	_, err = h.svc.RequestPairing(ctx, b, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	select {
	case ev := <-live:
		require.Equal(t, EventPairingRequested, ev.Kind)
		require.Contains(t, string(ev.Data), b.Username)
	case <-ctx.Done():
		t.Fatal("the user did not hear the request")
	}
}

// TestSendToUser: an agent pays a human user's custodial wallet with every
// rule of a send (fee, refusals), and the user is told.
func TestSendToUser(t *testing.T) {
	e := startSendEnv(t)
	ctx := context.Background()
	a := e.register(t, "bot")
	name := randomName(t, "ann")
	u, err := e.svc.CreateUser(ctx, NewUser{Email: name + "@example.com", Username: name})
	require.NoError(t, err)
	e.fund(t, a, chains.Base, "20")
	live, err := e.svc.WatchViewerEvents(ctx, signedIn(t, e.svc, u), nil)
	require.NoError(t, err)

	// A send-to-user names a user, a send an agent: never the other.
	_, _, err = e.svc.Send(ctx, a, SendRequest{ToUsername: u.Username, AmountUSD: dec("10")})
	require.ErrorIs(t, err, ErrNotFound, "send pays agents only")
	other := e.register(t, "bot2")
	_, _, err = e.svc.Send(ctx, a, SendRequest{ToUsername: other.Username, ToUser: true, AmountUSD: dec("10")})
	require.ErrorIs(t, err, ErrNotFound, "send-to-user pays users only")
	_, _, err = e.svc.Send(ctx, a, SendRequest{ToUsername: u.Username, ToUser: true, AmountUSD: dec("25")})
	require.ErrorIs(t, err, ErrInsufficientFunds)

	key := "pay-ann-1"
	res, replayed, err := sendKeyed(e.svc, ctx, a, &key, SendRequest{ToUsername: u.Username, ToUser: true, AmountUSD: dec("10"), Memo: "thanks"})
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "completed", res.Status)
	require.Equal(t, u.Username, res.ToUsername)
	requireDecimal(t, "9.99", res.Delivered)
	requireDecimal(t, "0.01", res.Fee)
	require.Equal(t, u.ID, *res.Transfer.ToUserID)
	require.Nil(t, res.Transfer.ToAgentID)
	requireTransferKind(t, e.db, res.Transfer, transfer.KindSendToUser)
	ws, err := e.svc.UserWallets(ctx, u)
	require.NoError(t, err)
	requireDecimal(t, "9.99", e.onChain(t, chains.Base, walletOn(ws, chains.Base).Address), "the user's wallet")
	requireDecimal(t, "10", e.onChain(t, chains.Base, e.wallet(t, a, chains.Base)), "the sender's wallet")
	bal, err := e.svc.UserBalance(ctx, u)
	require.NoError(t, err)
	requireDecimal(t, "9.99", bal.TotalUSD, "the user's balance")
	require.Len(t, bal.Balances, 2)

	again, replayed, err := sendKeyed(e.svc, ctx, a, &key, SendRequest{ToUsername: u.Username, ToUser: true, AmountUSD: dec("10"), Memo: "thanks"})
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, res.Transfer.ID, again.Transfer.ID)
	_, _, err = sendKeyed(e.svc, ctx, a, &key, SendRequest{ToUsername: u.Username, AmountUSD: dec("10"), Memo: "thanks"})
	require.Error(t, err, "the key of a send-to-user is not a send's")

	select {
	case ev := <-live:
		require.Equal(t, EventTransferReceived, ev.Kind)
		require.Contains(t, string(ev.Data), `"amount_usd":9.99`)
		require.Contains(t, string(ev.Data), a.Username)
	case <-time.After(30 * time.Second):
		t.Fatal("the user was not told")
	}

	// An agent recipient is told the same way.
	_, _, err = e.svc.Send(ctx, a, SendRequest{ToUsername: other.Username, AmountUSD: dec("1")})
	require.NoError(t, err)
	evs, err := e.svc.AccountEvents(ctx, AgentParty(other.ID), 0, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, EventTransferReceived, evs[0].Kind)
	require.Contains(t, string(evs[0].Data), `"amount_usd":0.999`)
}

// TestAccountEventsAcrossInstances: on PostgreSQL an event one instance
// commits reaches a subscriber on another (each its own bus listener), as
// between serve and worker processes.
func TestAccountEventsAcrossInstances(t *testing.T) {
	h := startHumansEnv(t)
	if !h.env.DB.IsPostgres() {
		t.Skip("one process by design on SQLite")
	}
	other := newTestService(t, h.env, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, u := h.agent(t, "bot"), h.user(t, "ann")
	live, err := h.svc.WatchViewerEvents(ctx, h.viewer(t, u), nil)
	require.NoError(t, err)
	_, err = other.RequestPairing(ctx, a, PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	select {
	case ev := <-live:
		require.Equal(t, EventPairingRequested, ev.Kind)
	case <-ctx.Done():
		t.Fatal("the other instance's event did not arrive")
	}
}
