package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// viewerAPI is a GraphQL server whose service mails (an outbox to read
// sign-in links from).
type viewerAPI struct {
	*agentAPI
	env *testenv.Env
}

func newViewerAPI(t *testing.T) *viewerAPI {
	t.Helper()
	return newViewerAPIWith(t, agentpay.Config{})
}

// newViewerAPIWith is newViewerAPI with other service settings.
func newViewerAPIWith(t *testing.T, cfg agentpay.Config) *viewerAPI {
	t.Helper()
	env := testenv.New(t, testenv.Options{Jobs: true})
	cfg.AgentMode = agentpay.ModeTest
	srv := newTestServer(t, env, cfg, HandlerConfig{})
	return &viewerAPI{agentAPI: &agentAPI{URL: srv.URL, DB: env.DB, Svc: srv.Svc}, env: env}
}

// signIn makes a user and signs them in through an e-mailed link,
// answering the session cookie's token and the CSRF token.
func (a *viewerAPI) signIn(t *testing.T, name string) (*ent.User, string, string) {
	t.Helper()
	ctx := context.Background()
	u, err := a.Svc.CreateUser(ctx, agentpay.NewUser{Email: name + "@example.com", Username: name, DisplayName: "Ann"})
	require.NoError(t, err)
	return a.signInAgain(t, u)
}

// signInAgain signs an existing user in (another browser) through an
// e-mailed link, answering the session cookie's token and the CSRF token.
func (a *viewerAPI) signInAgain(t *testing.T, u *ent.User) (*ent.User, string, string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, a.Svc.RequestSignIn(ctx, u.Email, "192.0.2.1"))
	m, err := a.DB.Ent.MailMessage.Query().Where(mailmessage.To(u.Email)).
		Order(ent.Desc(mailmessage.FieldID)).First(ctx)
	require.NoError(t, err)
	link := agentpay.MailLinks(m.Text)[0]
	in, err := a.Svc.CompleteSignIn(ctx, link[strings.LastIndex(link, "/")+1:], nil, "test")
	require.NoError(t, err)
	v, err := a.Svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	return u, in.SessionToken, v.CSRFToken()
}

// confirmContactEmail follows the newest contact e-mail confirmation link
// mailed to an address, as its holder does.
func (a *viewerAPI) confirmContactEmail(t *testing.T, email string) {
	t.Helper()
	ctx := context.Background()
	ms, err := a.DB.Ent.MailMessage.Query().Where(mailmessage.To(email), mailmessage.TextContains("/confirm-email/")).
		Order(ent.Desc(mailmessage.FieldCreatedAt), ent.Desc(mailmessage.FieldID)).All(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, ms, "no confirmation link mailed to %s", email)
	for _, l := range agentpay.MailLinks(ms[0].Text) {
		if i := strings.Index(l, "/confirm-email/"); i >= 0 {
			_, err := a.Svc.ConfirmMerchantEmail(ctx, l[i+len("/confirm-email/"):])
			require.NoError(t, err)
			return
		}
	}
	require.Fail(t, "no confirmation link", ms[0].Text)
}

// asViewer posts an operation with the session cookie and, when set, the
// CSRF token.
func (a *viewerAPI) asViewer(t *testing.T, session, csrf, q string, vars map[string]any) gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": q, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, a.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: httpx.SessionCookie, Value: session})
	if csrf != "" {
		req.Header.Set(httpx.CSRFHeader, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out gqlResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestViewerOverGraphQL(t *testing.T) {
	api := newViewerAPI(t)
	ctx := context.Background()
	u, session, csrf := api.signIn(t, uniqueName(t, "ann"))
	reg := api.register(t, uniqueName(t, "bot"))
	agent, err := api.DB.Ent.Agent.Query().Where().All(ctx)
	require.NoError(t, err)
	require.Len(t, agent, 1)

	var me struct {
		Viewer struct {
			ID, Username, Email, IdentityStatus string
			Wallets                             []struct{ Chain, Address string }
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { id username email identityStatus wallets { chain address } } }`, nil).decode(t, &me)
	require.Equal(t, u.ID.String(), me.Viewer.ID)
	require.Equal(t, "NOT_STARTED", me.Viewer.IdentityStatus)
	require.Len(t, me.Viewer.Wallets, 2)
	var bal struct {
		Viewer struct {
			Balance struct{ TotalUsd json.Number }
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { balance { totalUsd balances { chain balance } } } }`, nil).decode(t, &bal)
	require.Equal(t, "0", bal.Viewer.Balance.TotalUsd.String(), "no chains configured here: nothing held")

	// Without the CSRF token nothing is read or changed; without a session
	// nobody is signed in.
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", `{ viewer { id } }`, nil).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "nope", `{ viewer { id } }`, nil).code(t))
	require.Equal(t, "UNAUTHENTICATED", api.asViewer(t, "", csrf, `{ viewer { id } }`, nil).code(t))

	// Live: the agent's request reaches the signed-in human's socket.
	c := dialWS(t, api.URL, http.Header{"Cookie": {httpx.SessionCookie + "=" + session}})
	c.init(map[string]any{httpx.CSRFHeader: csrf})
	c.send(map[string]any{"id": "ev", "type": "subscribe", "payload": map[string]any{
		"query": `subscription { viewerEvents(after: 0) { id kind data } }`}})
	p, err := api.Svc.RequestPairing(ctx, agent[0], agentpay.PairingRequest{UserID: u.ID.String(), Message: "hello"})
	require.NoError(t, err)
	m, err := c.read()
	require.NoError(t, err)
	require.Equal(t, "next", m.Type, string(m.Payload))
	require.Contains(t, string(m.Payload), agentpay.EventPairingRequested)
	require.Contains(t, string(m.Payload), reg.Username)

	// A socket with the cookie but without the CSRF token gets nothing.
	bad := dialWS(t, api.URL, http.Header{"Cookie": {httpx.SessionCookie + "=" + session}})
	bad.init(map[string]any{})
	require.Equal(t, "FORBIDDEN", bad.operation("1", `{ viewer { id } }`).code(t))

	// Deciding: without the token refused and nothing moves; with it the
	// agent sees the denial.
	vars := map[string]any{"id": p.Pairing.ID.String()}
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", `mutation($id: ID!) { decidePairing(id: $id, decision: DENY) { status } }`, vars).code(t))
	var pairings struct {
		Viewer struct {
			Pairings []struct{ Status, AgentUsername string }
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { pairings { status agentUsername } } }`, nil).decode(t, &pairings)
	require.Equal(t, "PENDING", pairings.Viewer.Pairings[0].Status)
	var decided struct{ DecidePairing struct{ Status string } }
	api.asViewer(t, session, csrf, `mutation($id: ID!) { decidePairing(id: $id, decision: DENY) { status } }`, vars).decode(t, &decided)
	require.Equal(t, "DENIED", decided.DecidePairing.Status)
	require.Equal(t, "CONFLICT", api.asViewer(t, session, csrf, `mutation($id: ID!) { decidePairing(id: $id, decision: APPROVE) { status } }`, vars).code(t))
	evs, err := api.Svc.AccountEvents(ctx, agentpay.AgentParty(agent[0].ID), 0, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, agentpay.EventPairingDenied, evs[0].Kind)

	// Accepting the agent's invite code pairs at once; signing out ends
	// the session.
	var acc struct {
		AcceptInvitation struct{ Status, AgentUsername string }
	}
	api.asViewer(t, session, csrf, `mutation($t: String!) { acceptInvitation(token: $t) { status agentUsername } }`,
		map[string]any{"t": reg.InviteCode}).decode(t, &acc)
	require.Equal(t, "APPROVED", acc.AcceptInvitation.Status)
	var out struct{ SignOut bool }
	api.asViewer(t, session, csrf, `mutation { signOut }`, nil).decode(t, &out)
	require.True(t, out.SignOut)
	require.Equal(t, "UNAUTHENTICATED", api.asViewer(t, session, csrf, `{ viewer { id } }`, nil).code(t))
}
