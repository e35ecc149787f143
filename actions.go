package agentpay

import (
	"regexp"
	"strings"
)

// An Action is something a client does next that a message of the rules
// names: "pair with a human first", "get a new signed message". The rules
// answer REST, GraphQL and MCP clients alike, so a message never spells an
// action in one facade's words (a REST route, a mutation, a tool); it
// carries the action's mark, and each facade writes the mark in its own
// terms where the text leaves it: REST the route (internal/httpx's
// RESTActions), GraphQL its mutation or query (graph's graphQLActions), MCP
// the REST route as long as no tool does the action (the agent's key works
// on both). A message stored and read later (an account event, a webhook
// try's error) keeps the mark and is rendered when read, by the facade
// that reads it. TestNoRouteInTheRules (rest) fails on a route spelled in
// this package outside the registration's endpoints map, which the spec
// asks for.
type Action string

// The actions messages name; Actions lists them all.
const (
	// ActionRequestPairing: the agent asks a human to pair with it.
	ActionRequestPairing Action = "request_pairing"
	// ActionVerifyPartner: the agent links a partner identity.
	ActionVerifyPartner Action = "verify_partner"
	// ActionVerifyWallet: the agent proves an external wallet with an
	// EIP-712 signature over a message it got from
	// ActionGetSignatureMessage.
	ActionVerifyWallet Action = "verify_wallet"
	// ActionGetSignatureMessage: the agent gets the message to sign.
	ActionGetSignatureMessage Action = "get_signature_message"
	// ActionReadCardRequest: the agent reads one of its card requests
	// (Mark's argument: the request's id).
	ActionReadCardRequest Action = "read_card_request"
	// ActionRollWebhookSecret: the merchant rolls a mode's webhook secret
	// (with a key of that mode).
	ActionRollWebhookSecret Action = "roll_webhook_secret"
)

// Actions is every action; each facade's table covers them all (its tests
// hold it).
var Actions = []Action{
	ActionRequestPairing, ActionVerifyPartner, ActionVerifyWallet,
	ActionGetSignatureMessage, ActionReadCardRequest, ActionRollWebhookSecret,
}

// Mark is the action as a message carries it, {{action}} or, with an
// argument (an id the action takes), {{action argument}}.
func (a Action) Mark(arg ...string) string {
	if len(arg) == 0 || arg[0] == "" {
		return "{{" + string(a) + "}}"
	}
	return "{{" + string(a) + " " + arg[0] + "}}"
}

// actionMark finds a mark; an argument holds no space, brace or quote, so
// a mark inside JSON stays a mark.
var actionMark = regexp.MustCompile(`\{\{([a-z_]+)(?: ([^\s{}"\\]+))?\}\}`)

// RenderActions writes each action text marks as term says (a facade's
// words for it, given its argument, "" when it has none). A mark of no
// known action is left as it is.
func RenderActions(text string, term func(a Action, arg string) string) string {
	if !strings.Contains(text, "{{") {
		return text
	}
	return actionMark.ReplaceAllStringFunc(text, func(m string) string {
		sub := actionMark.FindStringSubmatch(m)
		a := Action(sub[1])
		for _, known := range Actions {
			if a == known {
				return term(a, sub[2])
			}
		}
		return m
	})
}
