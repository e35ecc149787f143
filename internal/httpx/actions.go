package httpx

import (
	"strings"

	"agentpay"
)

// RESTActions is each action a message of the rules names (agentpay.Action)
// as REST spells it: its route, a {parameter} standing for the action's
// argument. TestNoRouteInTheRules (rest) holds every entry to a route the
// router serves and every action to an entry. MCP answers in these terms
// too: it has no tool for any of these actions, and the agent's key works
// on REST.
var RESTActions = map[agentpay.Action]string{
	agentpay.ActionRequestPairing:      "POST /agents/me/pairings/request",
	agentpay.ActionVerifyPartner:       "POST /agents/me/verify-partner",
	agentpay.ActionVerifyWallet:        "POST /agents/me/wallets/verify",
	agentpay.ActionGetSignatureMessage: "GET /agents/signature-message",
	agentpay.ActionReadCardRequest:     "GET /agents/me/pairings/card/requests/{request_id}",
	agentpay.ActionRollWebhookSecret:   "POST /checkout/merchants/me/webhook-secret/roll",
}

// RESTTerm is a's route, its {parameter} replaced by arg when given.
func RESTTerm(a agentpay.Action, arg string) string {
	route, ok := RESTActions[a]
	if !ok {
		return a.Mark(arg)
	}
	if arg == "" {
		return route
	}
	open := strings.IndexByte(route, '{')
	end := strings.IndexByte(route, '}')
	if open < 0 || end < open {
		return route
	}
	return route[:open] + arg + route[end+1:]
}

// RenderREST is text with its actions written as REST routes.
func RenderREST(text string) string { return agentpay.RenderActions(text, RESTTerm) }
