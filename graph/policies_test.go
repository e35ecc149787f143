package graph

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
)

// Spending policies over GraphQL: the human sets one on a paired agent (a
// cap above the tier is BAD_USER_INPUT, an agent not paired NOT_FOUND),
// reads it back; the agent's send above the threshold is answered
// AWAITING_APPROVAL with the approval's id; the human sees it in
// viewer.spendApprovals, denies it, and the agent is told on its events.
func TestSpendingPoliciesOverGraphQL(t *testing.T) {
	api := newViewerAPIWith(t, agentpay.Config{})
	ctx := context.Background()
	u, session, csrf := api.signIn(t, "policy_viewer")
	reg := api.register(t, "policy_gql_agent")
	api.register(t, "policy_gql_payee")
	a, err := api.DB.Ent.Agent.Query().Where().All(ctx)
	require.NoError(t, err)
	var agentID string
	for _, x := range a {
		if x.Username == "policy_gql_agent" {
			pv, err := api.Svc.RequestPairing(ctx, x, agentpay.PairingRequest{UserID: u.ID.String()})
			require.NoError(t, err)
			_, err = api.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
			require.NoError(t, err)
			agentID = x.ID.String()
		}
	}
	require.NotEmpty(t, agentID)

	const set = `mutation($in: SpendingPolicyInput!) { setSpendingPolicy(input: $in) {
		agentUsername tier approvalThreshold perPaymentCap dailyCap allowedRecipients denyByDefault } }`
	res := api.asViewer(t, session, csrf, set, map[string]any{"in": map[string]any{"agentUsername": "policy_gql_agent", "dailyCap": 1e9}})
	require.Equal(t, "BAD_USER_INPUT", res.code(t))
	require.Contains(t, res.Errors[0].Message, "daily_cap: 1000000000 USD is above the agent's tier T0 limit of 500 USD")
	require.Equal(t, "NOT_FOUND", api.asViewer(t, session, csrf, set, map[string]any{"in": map[string]any{"agentUsername": "policy_gql_payee"}}).code(t))
	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", set, map[string]any{"in": map[string]any{"agentUsername": "policy_gql_agent"}}).code(t))

	var got struct {
		SetSpendingPolicy struct {
			AgentUsername, Tier              string
			ApprovalThreshold, PerPaymentCap *json.Number
			DailyCap                         *json.Number
			AllowedRecipients                []string
			DenyByDefault                    bool
		}
	}
	api.asViewer(t, session, csrf, set, map[string]any{"in": map[string]any{"agentUsername": "policy_gql_agent",
		"approvalThreshold": 2.5, "perPaymentCap": 50, "allowedRecipients": []string{"policy_gql_payee"}}}).decode(t, &got)
	p := got.SetSpendingPolicy
	require.Equal(t, "T0", p.Tier)
	require.Equal(t, "2.5", p.ApprovalThreshold.String())
	require.Equal(t, "50", p.PerPaymentCap.String())
	require.Nil(t, p.DailyCap)
	require.Equal(t, []string{"policy_gql_payee"}, p.AllowedRecipients)

	var list struct {
		Viewer struct {
			SpendingPolicies []struct{ AgentUsername string }
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { spendingPolicies { agentUsername } } }`, nil).decode(t, &list)
	require.Len(t, list.Viewer.SpendingPolicies, 1)

	// The agent's send above the threshold is held.
	send := `mutation { send(input: {toUsername: "policy_gql_payee", amountUsd: 3, chain: "base"}) { transactionId status } }`
	held := api.do(t, reg.APIKey, send, nil)
	require.Equal(t, "AWAITING_APPROVAL", held.code(t))
	approvalID, _ := held.Errors[0].Extensions["approvalId"].(string)
	require.NotEmpty(t, approvalID)
	require.Equal(t, "awaiting_approval", held.Errors[0].Extensions["status"])
	require.Contains(t, held.Errors[0].Message, "above the approval threshold of 2.5 USD")

	var approvals struct {
		Viewer struct {
			SpendApprovals []struct {
				ID, AgentUsername, Operation, Status, Recipient, Reason string
				AmountUsd                                               json.Number
			}
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { spendApprovals { id agentUsername operation status recipient reason amountUsd } } }`, nil).decode(t, &approvals)
	require.Len(t, approvals.Viewer.SpendApprovals, 1)
	ap := approvals.Viewer.SpendApprovals[0]
	require.Equal(t, approvalID, ap.ID)
	require.Equal(t, "policy_gql_agent", ap.AgentUsername)
	require.Equal(t, "SEND", ap.Operation)
	require.Equal(t, "AWAITING_APPROVAL", ap.Status)
	require.Equal(t, "3", ap.AmountUsd.String())

	vars := map[string]any{"id": approvalID}
	var begun struct{ BeginSpendApproval struct{ CeremonyID *string } }
	api.asViewer(t, session, csrf, `mutation($id: ID!) { beginSpendApproval(id: $id) { ceremonyId options } }`, vars).decode(t, &begun)
	require.Nil(t, begun.BeginSpendApproval.CeremonyID, "no passkey: no ceremony")
	var denied struct{ DenySpendApproval struct{ Status string } }
	api.asViewer(t, session, csrf, `mutation($id: ID!) { denySpendApproval(id: $id) { status } }`, vars).decode(t, &denied)
	require.Equal(t, "DENIED", denied.DenySpendApproval.Status)
	require.Equal(t, "CONFLICT", api.asViewer(t, session, csrf, `mutation($id: ID!) { approveSpendApproval(id: $id) { status } }`, vars).code(t))

	var evs struct {
		Me struct{ Events []struct{ Kind string } }
	}
	api.do(t, reg.APIKey, `{ me { events { kind } } }`, nil).decode(t, &evs)
	var kinds []string
	for _, e := range evs.Me.Events {
		kinds = append(kinds, e.Kind)
	}
	require.Contains(t, kinds, agentpay.EventApprovalRequested)
	require.Contains(t, kinds, agentpay.EventApprovalDenied)

	var cleared struct{ ClearSpendingPolicy bool }
	api.asViewer(t, session, csrf, `mutation { clearSpendingPolicy(agentUsername: "policy_gql_agent") }`, nil).decode(t, &cleared)
	require.True(t, cleared.ClearSpendingPolicy)
}

// TestHeldOperationDecidersOverGraphQL: a second human joins the agent on
// the first's consent (viewer.pairingConsents, decidePairingConsent); an
// operation the first's policy holds shows its deciders, and the second
// human, paired too, sees it but cannot begin, approve or deny it
// (FORBIDDEN, nothing changes). The agent ends the second's pairing
// (revokePairing).
func TestHeldOperationDecidersOverGraphQL(t *testing.T) {
	api := newViewerAPIWith(t, agentpay.Config{})
	ctx := context.Background()
	ana, anaSession, anaCSRF := api.signIn(t, "deciding_ana")
	bo, boSession, boCSRF := api.signIn(t, "other_bo")
	reg := api.register(t, "decided_agent")
	api.register(t, "decided_payee")
	a, err := api.DB.Ent.Agent.Get(ctx, uuid.MustParse(reg.AgentID))
	require.NoError(t, err)
	pair := func(u *ent.User) string {
		pv, err := api.Svc.RequestPairing(ctx, a, agentpay.PairingRequest{UserID: u.ID.String()})
		require.NoError(t, err)
		_, err = api.Svc.DecidePairing(ctx, u, pv.Pairing.ID.String(), agentpay.ApprovePairing)
		require.NoError(t, err)
		return pv.Pairing.ID.String()
	}
	pair(ana)
	boPairing := pair(bo)

	var consents struct {
		Viewer struct {
			PairingConsents []struct{ ID, AgentUsername, Username, Status string }
		}
	}
	api.asViewer(t, anaSession, anaCSRF, `{ viewer { pairingConsents { id agentUsername username status } } }`, nil).decode(t, &consents)
	require.Len(t, consents.Viewer.PairingConsents, 1)
	require.Equal(t, "AWAITING_CONSENT", consents.Viewer.PairingConsents[0].Status)
	require.Equal(t, bo.Username, consents.Viewer.PairingConsents[0].Username)
	consent := `mutation($id: ID!, $d: PairingDecision!) { decidePairingConsent(id: $id, decision: $d) { status } }`
	require.Equal(t, "NOT_FOUND", api.asViewer(t, boSession, boCSRF, consent, map[string]any{"id": boPairing, "d": "APPROVE"}).code(t), "not for the newcomer")
	var decided struct{ DecidePairingConsent struct{ Status string } }
	api.asViewer(t, anaSession, anaCSRF, consent, map[string]any{"id": boPairing, "d": "APPROVE"}).decode(t, &decided)
	require.Equal(t, "APPROVED", decided.DecidePairingConsent.Status)

	_, err = api.Svc.SetSpendingPolicy(ctx, &agentpay.Viewer{User: ana}, "decided_agent", agentpay.SpendingPolicyInput{ApprovalThreshold: ptrDecimal("1")})
	require.NoError(t, err)
	held := api.do(t, reg.APIKey, `mutation { send(input: {toUsername: "decided_payee", amountUsd: 2, chain: "base"}) { status } }`, nil)
	require.Equal(t, "AWAITING_APPROVAL", held.code(t))
	vars := map[string]any{"id": held.Errors[0].Extensions["approvalId"]}

	type approvals struct {
		Viewer struct {
			SpendApprovals []struct {
				Status, ID           string
				Deciders, ApprovedBy []string
				ViewerDecides        bool
			}
		}
	}
	const list = `{ viewer { spendApprovals { id status deciders approvedBy viewerDecides } } }`
	var seen approvals
	api.asViewer(t, boSession, boCSRF, list, nil).decode(t, &seen)
	require.Len(t, seen.Viewer.SpendApprovals, 1, "bo sees it")
	require.Equal(t, []string{ana.Username}, seen.Viewer.SpendApprovals[0].Deciders)
	require.False(t, seen.Viewer.SpendApprovals[0].ViewerDecides)
	for _, m := range []string{
		`mutation($id: ID!) { approveSpendApproval(id: $id) { status } }`,
		`mutation($id: ID!) { denySpendApproval(id: $id) { status } }`,
		`mutation($id: ID!) { beginStepUp(input: {action: APPROVE_SPEND, id: $id}) { id } }`,
	} {
		res := api.asViewer(t, boSession, boCSRF, m, vars)
		require.Equal(t, "FORBIDDEN", res.code(t), m)
		require.Contains(t, res.Errors[0].Message, "held by the spending policy of "+ana.Username)
	}
	api.asViewer(t, anaSession, anaCSRF, list, nil).decode(t, &seen)
	require.Equal(t, "AWAITING_APPROVAL", seen.Viewer.SpendApprovals[0].Status, "nothing changed")
	require.True(t, seen.Viewer.SpendApprovals[0].ViewerDecides)
	var denied struct{ DenySpendApproval struct{ Status string } }
	api.asViewer(t, anaSession, anaCSRF, `mutation($id: ID!) { denySpendApproval(id: $id) { status } }`, vars).decode(t, &denied)
	require.Equal(t, "DENIED", denied.DenySpendApproval.Status)

	// The agent ends bo's pairing.
	var revoked struct {
		RevokePairing struct{ Status, Username string }
	}
	api.do(t, reg.APIKey, `mutation($id: ID!) { revokePairing(id: $id) { status username } }`, map[string]any{"id": boPairing}).decode(t, &revoked)
	require.Equal(t, "REVOKED", revoked.RevokePairing.Status)
	require.Equal(t, "CONFLICT", api.do(t, reg.APIKey, `mutation($id: ID!) { revokePairing(id: $id) { status } }`, map[string]any{"id": boPairing}).code(t))
	var mine struct {
		Viewer struct{ Pairings []struct{ Status string } }
	}
	api.asViewer(t, boSession, boCSRF, `{ viewer { pairings { status } } }`, nil).decode(t, &mine)
	require.Equal(t, "REVOKED", mine.Viewer.Pairings[0].Status)
}

func ptrDecimal(s string) *decimal.Decimal { d := decimal.RequireFromString(s); return &d }
