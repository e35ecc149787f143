package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/internal/testenv"
)

// newUser makes a human user through the service (the app's sign-up is
// not a REST route).
func (a *testAPI) newUser(username string) *ent.User {
	a.t.Helper()
	u, err := a.Svc.CreateUser(context.Background(), agentpay.NewUser{
		Email: username + "@example.com", Username: username, DisplayName: "Ann Example",
	})
	require.NoError(a.t, err)
	return u
}

// requireNoEmailedToken checks that an answer to the agent holds none of
// the invitation tokens mailed to an address, and that what it holds signs
// nobody up with the address.
func requireNoEmailedToken(t *testing.T, api *testAPI, to string, answer []byte) {
	t.Helper()
	ctx := context.Background()
	mails, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).All(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, mails)
	for _, m := range mails {
		token := regexp.MustCompile(`inv_[0-9A-Za-z]{43}`).FindString(m.Text)
		require.NotEmpty(t, token, "the e-mail carries the token")
		require.NotContains(t, string(answer), token, "the agent's answer carries the e-mailed token")
	}
	for _, word := range regexp.MustCompile(`/invite/([^"\s]+)`).FindAllStringSubmatch(string(answer), -1) {
		_, _, err := api.Svc.SignUpByInvitation(ctx, word[1], agentpay.NewUser{Username: "took_over"}, "agent")
		require.ErrorIs(t, err, agentpay.ErrConflict, "what the agent got signs nobody up: %s", word[1])
	}
	_, err = api.Svc.UserByEmail(ctx, to)
	require.ErrorIs(t, err, agentpay.ErrNotFound, "no account for the invited address")
}

// newMailingAPI is an API whose service queues mail (invitations and
// pairing requests write e-mails).
func newMailingAPI(t *testing.T) *testAPI {
	t.Helper()
	return newTestAPI(t, testAPIConfig{Env: testenv.New(t, testenv.Options{Jobs: true})})
}

func TestInviteHumanOverREST(t *testing.T) {
	api := newMailingAPI(t)
	reg := api.register("inviting_agent")
	raiseTier(t, api, reg.ID)
	key := agentKey(reg.APIKey)

	resp := api.do(http.MethodPost, "/agents/me/invite-human", map[string]any{"email": "Ann@Example.com"}, key)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	m := resp.Map(t)
	require.Equal(t, "http://app.test/invite/"+m["invite_id"].(string), m["invite_url"], "the invitation's reference, not its token")
	assertGolden(t, "agents_invite_human", resp.Body, nil)
	requireNoEmailedToken(t, api, "ann@example.com", resp.Body)

	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"the same address the same day", map[string]any{"email": "ann@example.com"}, http.StatusConflict},
		{"no address", map[string]any{}, http.StatusBadRequest},
		{"not an address", map[string]any{"email": "ann"}, http.StatusBadRequest},
		{"not a string", map[string]any{"email": 7}, http.StatusBadRequest},
		{"an unknown field", map[string]any{"email": "b@example.com", "cc": "x"}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/agents/me/invite-human", tc.body, key)
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
		})
	}
	n, err := api.DB.Ent.Invitation.Query().Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n, "refusals change nothing")
	require.Equal(t, http.StatusUnauthorized, api.do(http.MethodPost, "/agents/me/invite-human", map[string]any{"email": "c@example.com"}, nil).Status)
}

func TestPairingsOverREST(t *testing.T) {
	api := newMailingAPI(t)
	ctx := context.Background()
	reg := api.register("pairing_agent")
	raiseTier(t, api, reg.ID) // T0's 10 requests a minute would not last the test
	key := agentKey(reg.APIKey)
	u := api.newUser("paired_human")
	extra := map[string]string{}

	resp := api.do(http.MethodGet, "/agents/me/pairings", nil, key)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Empty(t, resp.Map(t)["pairings"])

	resp = api.do(http.MethodPost, "/agents/me/pairings/request", map[string]any{"user_id": u.ID.String(), "message": "Let me pay your bills"}, key)
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	assertGolden(t, "agents_pairing_request", resp.Body, extra)
	pairingID := resp.Map(t)["pairing_id"].(string)

	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"already pending", map[string]any{"user_id": u.ID.String()}, http.StatusConflict},
		{"unknown user", map[string]any{"user_id": "6f1c2a52-0000-4000-8000-000000000000"}, http.StatusNotFound},
		{"malformed user id", map[string]any{"user_id": "ann"}, http.StatusBadRequest},
		{"no user id", map[string]any{"message": "hi"}, http.StatusBadRequest},
		{"message over 500 characters", map[string]any{"user_id": u.ID.String(), "message": strings.Repeat("m", 501)}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/agents/me/pairings/request", tc.body, key)
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
		})
	}

	// The human denies: the list and the events say so.
	_, err := api.Svc.DecidePairing(ctx, u, pairingID, agentpay.DenyPairing)
	require.NoError(t, err)
	resp = api.do(http.MethodGet, "/agents/me/pairings", nil, key)
	require.Equal(t, http.StatusOK, resp.Status)
	assertGolden(t, "agents_pairings", resp.Body, extra)

	resp = api.do(http.MethodGet, "/agents/me/events", nil, key)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "agents_events", resp.Body, extra)
	var evs accountEventsResponse
	resp.JSON(t, &evs)
	require.Len(t, evs.Events, 1)
	require.Equal(t, agentpay.EventPairingDenied, evs.Events[0].Kind)
	require.Equal(t, evs.Events[0].ID, evs.Next)

	resp = api.do(http.MethodGet, "/agents/me/events?after="+strconv.FormatInt(evs.Next, 10), nil, key)
	require.Equal(t, http.StatusOK, resp.Status)
	resp.JSON(t, &evs)
	require.Empty(t, evs.Events, "nothing after the last one")
	for _, q := range []string{"after=-1", "after=x", "limit=101", "limit=-2", "limit=0", "limit="} {
		require.Equal(t, http.StatusBadRequest, api.do(http.MethodGet, "/agents/me/events?"+q, nil, key).Status, q)
	}
}

// TestSendToUserOverREST: send-to-user answers the Transfer of spec 2.3
// with to_user, and refuses as a send does.
func TestSendToUserOverREST(t *testing.T) {
	c := startSendChains(t)
	api := c.api(t, nil)
	reg := api.register("paying_agent")
	raiseTier(t, api, reg.ID)
	key := agentKey(reg.APIKey)
	u := api.newUser("paid_human")
	c.fund(t, chains.Base, reg.Base, 20_000_000)

	resp := api.do(http.MethodPost, "/agents/me/wallet/send-to-user", map[string]any{"to_username": u.Username, "amount_usd": 10}, key)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "agents_send_to_user", resp.Body, nil)
	m := resp.Map(t)
	require.Equal(t, u.Username, m["to_user"])
	require.Equal(t, 9.99, m["amount_usd"])
	require.NotContains(t, m, "to_agent")

	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"an agent is not a user", map[string]any{"to_username": reg.Username, "amount_usd": 1}, http.StatusNotFound},
		{"no such user", map[string]any{"to_username": "nobody_here", "amount_usd": 1}, http.StatusNotFound},
		{"more than the balance", map[string]any{"to_username": u.Username, "amount_usd": 50}, http.StatusBadRequest},
		{"below the minimum", map[string]any{"to_username": u.Username, "amount_usd": 0.001}, http.StatusBadRequest},
		{"no amount", map[string]any{"to_username": u.Username}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/agents/me/wallet/send-to-user", tc.body, key)
			require.Equal(t, tc.status, resp.Status, string(resp.Body))
		})
	}
	// A send names agents only.
	resp = api.do(http.MethodPost, "/agents/me/wallet/send", map[string]any{"to_username": u.Username, "amount_usd": 1}, key)
	require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
}

// TestRegistrationEndpointsExist: every "METHOD /path" the registration
// answer lists is a route (with the agent's key, never 404 or 405).
func TestRegistrationEndpointsExist(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	reg := api.register("endpoints_agent")
	raiseTier(t, api, reg.ID)
	var body registrationBody
	require.NoError(t, json.Unmarshal(reg.Body, &body))
	require.NotEmpty(t, body.Endpoints)
	for name, ep := range body.Endpoints {
		method, path, ok := strings.Cut(ep, " ")
		if !ok {
			require.True(t, strings.HasPrefix(ep, "http"), "%s: %s is a link or METHOD /path", name, ep)
			continue
		}
		var payload any
		if method == http.MethodPost {
			payload = map[string]any{}
		}
		resp := api.do(method, path, payload, agentKey(reg.APIKey))
		require.NotEqual(t, http.StatusNotFound, resp.Status, "%s: %s: %s", name, ep, resp.Body)
		require.NotEqual(t, http.StatusMethodNotAllowed, resp.Status, "%s: %s", name, ep)
	}
}

// The limits on an agent's invitations over REST: an address that
// declined the agent's invitation is 403, one past its day of mail from
// all agents 429, and neither records an invitation.
func TestInviteHumanLimitsOverREST(t *testing.T) {
	env := testenv.New(t, testenv.Options{Clock: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMailDailyLimit: 2}})
	ctx := context.Background()
	invite := func(key http.Header, email string) apiResponse {
		return api.do(http.MethodPost, "/agents/me/invite-human", map[string]any{"email": email}, key)
	}
	keys := make([]http.Header, 3)
	for i := range keys {
		reg := api.register("bot_" + strconv.Itoa(i))
		raiseTier(t, api, reg.ID)
		keys[i] = agentKey(reg.APIKey)
	}
	require.Equal(t, http.StatusCreated, invite(keys[0], "ann@example.com").Status)
	require.Equal(t, http.StatusCreated, invite(keys[1], "ann@example.com").Status)
	resp := invite(keys[2], "ann@example.com")
	require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
	require.Contains(t, resp.Map(t)["detail"], "2 invitation and pairing e-mails per day to this address")

	require.Equal(t, http.StatusCreated, invite(keys[0], "bea@example.com").Status)
	mails, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To("bea@example.com")).All(ctx)
	require.NoError(t, err)
	token := regexp.MustCompile(`inv_[0-9A-Za-z]{43}`).FindString(mails[0].Text)
	_, err = api.Svc.DeclineInvitation(ctx, token)
	require.NoError(t, err)
	env.Clock.Advance(24 * time.Hour)
	resp = invite(keys[0], "bea@example.com")
	require.Equal(t, http.StatusForbidden, resp.Status, string(resp.Body))
	require.Equal(t, "insufficient permissions: bea@example.com does not accept invitations from you", resp.Map(t)["detail"])
	n, err := api.DB.Ent.Invitation.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "refusals record nothing")
	resp = invite(keys[1], "bea@example.com")
	require.Equal(t, http.StatusCreated, resp.Status, "another agent may: %s", resp.Body)
}

// TestRevokePairingOverREST: the agent ends a pairing at POST
// /agents/me/pairings/{pairing_id}/revoke (golden): the human's spending
// policy stops applying at once and they are told. Another agent's
// pairing or an unknown id is 404, a second revoke 409.
func TestRevokePairingOverREST(t *testing.T) {
	api := newMailingAPI(t)
	ctx := context.Background()
	reg := api.register("revoking_agent")
	raiseTier(t, api, reg.ID)
	key := agentKey(reg.APIKey)
	u := api.newUser("revoked_human")
	pv, err := api.Svc.RequestPairing(ctx, mustAgent(t, api, reg.ID), agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = api.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
	require.NoError(t, err)
	tiny := decimal.RequireFromString("0.000001")
	_, err = api.Svc.SetSpendingPolicy(ctx, &agentpay.Viewer{User: u}, "revoking_agent", agentpay.SpendingPolicyInput{PerPaymentCap: &tiny})
	require.NoError(t, err)
	path := "/agents/me/pairings/" + pv.Pairing.ID.String() + "/revoke"

	other := api.register("other_agent")
	resp := api.do(http.MethodPost, path, nil, agentKey(other.APIKey))
	require.Equal(t, http.StatusNotFound, resp.Status, "another agent's pairing")
	resp = api.do(http.MethodPost, "/agents/me/pairings/nope/revoke", nil, key)
	require.Equal(t, http.StatusNotFound, resp.Status)
	require.Equal(t, http.StatusUnauthorized, api.do(http.MethodPost, path, nil, nil).Status)

	resp = api.do(http.MethodPost, path, nil, key)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "agents_pairing_revoked", resp.Body, nil)
	resp = api.do(http.MethodPost, path, nil, key)
	require.Equal(t, http.StatusConflict, resp.Status, "revoked once")
	_, err = api.Svc.SetSpendingPolicy(ctx, &agentpay.Viewer{User: u}, "revoking_agent", agentpay.SpendingPolicyInput{PerPaymentCap: &tiny})
	require.ErrorIs(t, err, agentpay.ErrNotFound, "the human no longer governs the agent")
	pols, err := api.Svc.UserSpendingPolicies(ctx, u)
	require.NoError(t, err)
	require.Empty(t, pols, "their policy no longer applies")
	evs, err := api.Svc.AccountEvents(ctx, agentpay.UserParty(u.ID), 0, nil)
	require.NoError(t, err)
	require.Equal(t, agentpay.EventPairingRevoked, evs[len(evs)-1].Kind, "the human is told")
}
