package graph

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/cardissuer/sandbox"
)

// The human's card requests over GraphQL: listed with agent, amount,
// merchant and description; without a passkey the approval needs no
// ceremony; denying tells the agent and a second decision conflicts. (The
// approval that moves money is agentpay's TestCardPurchaseChargeAndReturn,
// and with a passkey app's TestCardApprovalInBrowser.)
func TestCardRequestsOverGraphQL(t *testing.T) {
	api := newViewerAPIWith(t, agentpay.Config{CardIssuer: sandbox.New()})
	ctx := context.Background()
	u, session, csrf := api.signIn(t, "card_viewer")
	reg, err := api.Svc.QuickRegister(ctx, "card_gql_agent")
	require.NoError(t, err)
	r := api.DB.Ent.CardRequest.Create().SetAgentID(reg.Agent.ID).SetUserID(u.ID).SetAmount(12_500_000).
		SetMerchantName("Acme Books").SetDescription("a book").SetIssuer(sandbox.Name).
		SetExpiresAt(time.Now().Add(time.Hour).UTC()).SaveX(ctx)

	var list struct {
		Viewer struct {
			CardRequests []struct {
				ID, AgentUsername, Status, MerchantName, Description string
				AmountUsd                                            json.Number
				CardLast4                                            *string
			}
		}
	}
	api.asViewer(t, session, csrf, `{ viewer { cardRequests { id agentUsername status amountUsd merchantName description cardLast4 } } }`, nil).decode(t, &list)
	require.Len(t, list.Viewer.CardRequests, 1)
	got := list.Viewer.CardRequests[0]
	require.Equal(t, r.ID.String(), got.ID)
	require.Equal(t, "card_gql_agent", got.AgentUsername)
	require.Equal(t, "PENDING_APPROVAL", got.Status)
	require.Equal(t, "12.5", got.AmountUsd.String(), "a JSON number, exact")
	require.Equal(t, "Acme Books", got.MerchantName)
	require.Equal(t, "a book", got.Description)
	require.Nil(t, got.CardLast4)

	vars := map[string]any{"id": r.ID.String()}
	var begun struct{ BeginCardApproval struct{ CeremonyID *string } }
	api.asViewer(t, session, csrf, `mutation($id: ID!) { beginCardApproval(id: $id) { ceremonyId options } }`, vars).decode(t, &begun)
	require.Nil(t, begun.BeginCardApproval.CeremonyID, "no passkey: no ceremony")

	require.Equal(t, "FORBIDDEN", api.asViewer(t, session, "", `mutation($id: ID!) { denyCardRequest(id: $id) { status } }`, vars).code(t))
	var denied struct{ DenyCardRequest struct{ Status string } }
	api.asViewer(t, session, csrf, `mutation($id: ID!) { denyCardRequest(id: $id) { status } }`, vars).decode(t, &denied)
	require.Equal(t, "DENIED", denied.DenyCardRequest.Status)
	require.Equal(t, "CONFLICT", api.asViewer(t, session, csrf, `mutation($id: ID!) { approveCardRequest(id: $id) { status } }`, vars).code(t))
	evs, err := api.Svc.AccountEvents(ctx, agentpay.AgentParty(reg.Agent.ID), 0, nil)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, agentpay.EventCardDenied, evs[0].Kind)

	// Another human's request is not found.
	_, other, otherCSRF := api.signIn(t, "card_other")
	require.Equal(t, "NOT_FOUND", api.asViewer(t, other, otherCSRF, `mutation($id: ID!) { denyCardRequest(id: $id) { status } }`, vars).code(t))
}
