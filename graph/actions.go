package graph

import (
	"agentpay"
	"agentpay/internal/httpx"
)

// graphQLActions is each action a message of the rules names
// (agentpay.Action) as GraphQL spells it: the operation that does it. An
// action GraphQL has no operation for is REST's route, said to be REST's
// (the same key works there). TestGraphQLActions holds every action to an
// entry and every operation named to the served schema.
var graphQLActions = map[agentpay.Action]string{
	agentpay.ActionRequestPairing:      "mutation requestPairing",
	agentpay.ActionVerifyPartner:       "mutation verifyPartner",
	agentpay.ActionVerifyWallet:        "",
	agentpay.ActionGetSignatureMessage: "",
	agentpay.ActionReadCardRequest:     "",
	agentpay.ActionRollWebhookSecret:   "mutation rollWebhookSecret",
}

// graphQLTerm is a in GraphQL's words.
func graphQLTerm(a agentpay.Action, arg string) string {
	if op := graphQLActions[a]; op != "" {
		return op
	}
	return "REST " + httpx.RESTTerm(a, arg)
}

// renderGraphQL is text with its actions in GraphQL's words.
func renderGraphQL(text string) string { return agentpay.RenderActions(text, graphQLTerm) }

// renderGraphQLPtr is renderGraphQL of an optional text.
func renderGraphQLPtr(text *string) *string {
	if text == nil {
		return nil
	}
	out := renderGraphQL(*text)
	return &out
}
