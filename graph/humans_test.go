package graph

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/mailmessage"
)

// TestAgentHumansOverGraphQL: invitations, pairing requests and the
// agent's pairings and events, with the REST facade's refusals, and the
// agentEvents subscription hearing a human's decision.
func TestAgentHumansOverGraphQL(t *testing.T) {
	api := newViewerAPI(t) // a service that mails
	ctx := context.Background()
	reg := api.register(t, uniqueName(t, "gqlh"))
	aid := uuid.MustParse(reg.AgentID)
	// T3, so the rate limit does not get in the way.
	require.NoError(t, api.DB.Ent.Agent.UpdateOneID(aid).
		SetPartnerVerified(true).SetExternalWalletVerified(true).SetHumanVerified(true).Exec(ctx))
	require.NoError(t, api.Svc.RecomputeTrust(ctx, aid))
	name := uniqueName(t, "ann")
	u, err := api.Svc.CreateUser(ctx, agentpay.NewUser{Email: name + "@example.com", Username: name, DisplayName: "Ann"})
	require.NoError(t, err)

	var inv struct {
		InviteHuman struct{ ID, Email, InviteURL string }
	}
	api.do(t, reg.APIKey, `mutation { inviteHuman(email: "Bob@Example.com") { id email inviteUrl expiresAt message } }`, nil).decode(t, &inv)
	require.Equal(t, "bob@example.com", inv.InviteHuman.Email)
	require.True(t, strings.HasSuffix(inv.InviteHuman.InviteURL, "/invite/"+inv.InviteHuman.ID), "the invitation's reference: %s", inv.InviteHuman.InviteURL)
	// The e-mailed token is not in the answer, and what is signs nobody up.
	mail, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To("bob@example.com")).Only(ctx)
	require.NoError(t, err)
	emailed := regexp.MustCompile(`inv_[0-9A-Za-z]{43}`).FindString(mail.Text)
	require.NotEmpty(t, emailed)
	require.NotContains(t, inv.InviteHuman.InviteURL, emailed)
	raw := api.do(t, reg.APIKey, `mutation { inviteHuman(email: "Bob2@Example.com") { id email inviteUrl expiresAt message } }`, nil)
	require.Empty(t, raw.Errors)
	mail2, err := api.DB.Ent.MailMessage.Query().Where(mailmessage.To("bob2@example.com")).Only(ctx)
	require.NoError(t, err)
	emailed2 := regexp.MustCompile(`inv_[0-9A-Za-z]{43}`).FindString(mail2.Text)
	require.NotContains(t, string(raw.Data), emailed2, "the e-mailed token is never in the agent's answer")
	require.NotContains(t, string(raw.Data), "inv_")
	_, _, err = api.Svc.SignUpByInvitation(ctx, inv.InviteHuman.ID, agentpay.NewUser{Username: uniqueName(t, "mal")}, "agent")
	require.ErrorIs(t, err, agentpay.ErrConflict, "the reference signs nobody up")
	_, err = api.Svc.UserByEmail(ctx, "bob@example.com")
	require.ErrorIs(t, err, agentpay.ErrNotFound)
	require.Equal(t, "CONFLICT", api.do(t, reg.APIKey, `mutation { inviteHuman(email: "bob@example.com") { id } }`, nil).code(t))
	require.Equal(t, "BAD_USER_INPUT", api.do(t, reg.APIKey, `mutation { inviteHuman(email: "bob") { id } }`, nil).code(t))
	require.Equal(t, "UNAUTHENTICATED", api.do(t, "", `mutation { inviteHuman(email: "c@example.com") { id } }`, nil).code(t))

	// The subscription, from the first event (without after it would
	// start whenever the server gets to it, maybe after the decision).
	c := dialWS(t, api.URL, nil)
	c.init(map[string]any{"X-Agent-Key": reg.APIKey})
	c.send(map[string]any{"id": "ev", "type": "subscribe", "payload": map[string]any{
		"query": `subscription { agentEvents(after: 0) { id kind data createdAt } }`}})

	var req struct {
		RequestPairing struct{ ID, Status, Username string }
	}
	api.do(t, reg.APIKey, `mutation($u: ID!) { requestPairing(userId: $u, message: "hi") { id status username expiresAt } }`,
		map[string]any{"u": u.ID.String()}).decode(t, &req)
	require.Equal(t, "PENDING", req.RequestPairing.Status)
	require.Equal(t, name, req.RequestPairing.Username)
	require.Equal(t, "CONFLICT", api.do(t, reg.APIKey, `mutation($u: ID!) { requestPairing(userId: $u) { id } }`,
		map[string]any{"u": u.ID.String()}).code(t))
	require.Equal(t, "NOT_FOUND", api.do(t, reg.APIKey, `mutation($u: ID!) { requestPairing(userId: $u) { id } }`,
		map[string]any{"u": uuid.NewString()}).code(t))

	_, err = api.Svc.DecidePairing(ctx, u, req.RequestPairing.ID, agentpay.ApprovePairing)
	require.NoError(t, err)
	m, err := c.read()
	require.NoError(t, err)
	require.Equal(t, "next", m.Type, string(m.Payload))
	var ev struct {
		Data struct {
			AgentEvents struct {
				ID   int64
				Kind string
				Data map[string]any
			}
		}
	}
	require.NoError(t, json.Unmarshal(m.Payload, &ev))
	require.Equal(t, agentpay.EventPairingApproved, ev.Data.AgentEvents.Kind)
	require.Equal(t, name, ev.Data.AgentEvents.Data["username"])

	var me struct {
		Me struct {
			Pairings []struct {
				ID, Status, Username, DisplayName string
				KycVerified                       bool
			}
			Events []struct {
				ID   int64
				Kind string
			}
		}
	}
	api.do(t, reg.APIKey, `{ me { pairings { id status username displayName kycVerified decidedAt } events { id kind } } }`, nil).decode(t, &me)
	require.Len(t, me.Me.Pairings, 1)
	require.Equal(t, "APPROVED", me.Me.Pairings[0].Status)
	require.Equal(t, "Ann", me.Me.Pairings[0].DisplayName)
	require.Len(t, me.Me.Events, 1)
	require.Equal(t, ev.Data.AgentEvents.ID, me.Me.Events[0].ID)
	require.Equal(t, "BAD_USER_INPUT", api.do(t, reg.APIKey, `{ me { events(limit: 101) { id } } }`, nil).code(t))
}
