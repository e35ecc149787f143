package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// tools is the agent's tool table, in the order tools/list shows them.
var tools = []toolDef{
	define("get_balance",
		"The agent's USDC balance on each chain it holds a wallet on, read from the chains now, and the exact total in USD.",
		func(ctx context.Context, t *toolset, a *ent.Agent, _ noInput) (httpx.Balance, error) {
			b, err := t.svc.Balance(ctx, a)
			if err != nil {
				return httpx.Balance{}, err
			}
			return httpx.BalanceOf(b), nil
		}),
	define("send",
		"Send USDC to another agent by username (0.1% treasury fee; the recipient receives amount_usd less the fee). Gasless; within the agent's per-send and daily limits; never more than the available balance. Answers the transfer, or, when a paired human's spending policy holds the send, the approval it waits for (approval_id, status awaiting_approval).",
		func(ctx context.Context, t *toolset, a *ent.Agent, in sendInput) (orHeld[httpx.Transfer], error) {
			return t.send(ctx, a, in, false)
		}),
	define("send_to_user",
		"Send USDC to a human user's custodial wallet by username: every rule of send.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in sendInput) (orHeld[httpx.Transfer], error) {
			return t.send(ctx, a, in, true)
		}),
	define("pay_checkout",
		"Pay an agentpay checkout session (its external id, cs_test_... or cs_live_..., from its checkout_url) with its exact amount from the agent's wallet, gasless, within the agent's limits; answers the payment with its status (detected once included, then confirming and confirmed as the chain confirms), or, when a paired human's spending policy holds it, the approval it waits for (approval_id, status awaiting_approval).",
		func(ctx context.Context, t *toolset, a *ent.Agent, in payCheckoutInput) (orHeld[httpx.CheckoutPayment], error) {
			req := agentpay.PayCheckoutRequest{ExternalID: in.ExternalID, Chain: in.Chain, IdempotencyKey: nonEmpty(in.IdempotencyKey)}
			res, _, err := t.svc.PayCheckout(ctx, a, req)
			if err != nil {
				return orHeld[httpx.CheckoutPayment]{}, err
			}
			if res.Approval != nil {
				return held[httpx.CheckoutPayment](httpx.ApprovalOf(res.Approval, res.Message)), nil
			}
			return done(httpx.CheckoutPaymentOf(res)), nil
		}),
	define("request_card_purchase",
		"Ask the paired, identity-verified human to approve a card purchase: amount_usd (0.50 to the per-send limit, whole cents) at merchant_name. The human approves or denies in the app; once approved the agent reads its one-time card (ctok_...) with GET /agents/me/pairings/card/requests/{request_id} (details shown once). Answers the request, pending_approval; a 2026-07-28 client with the Tasks extension gets a task that completes with the card (its details in the first tasks/get that completes) or fails with why.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in cardPurchaseInput) (cardAnswer, error) {
			req := agentpay.CardPurchaseRequest{AmountUSD: in.AmountUSD.Decimal, MerchantName: in.MerchantName, Description: in.Description, UserID: in.UserID,
				IdempotencyKey: nonEmpty(in.IdempotencyKey)}
			v, _, err := t.svc.RequestCardPurchase(ctx, a, req)
			if err != nil {
				return cardAnswer{}, err
			}
			return cardAnswer{httpx.CardRequestOf(v)}, nil
		}),
	define("list_pairings",
		"The agent's pairings with human users (pending, awaiting_consent, approved, denied, revoked or expired), newest first.",
		func(ctx context.Context, t *toolset, a *ent.Agent, _ noInput) (httpx.Pairings, error) {
			vs, err := t.svc.AgentPairings(ctx, a)
			if err != nil {
				return httpx.Pairings{}, err
			}
			return httpx.PairingsOf(a, vs), nil
		}),
	define("revoke_pairing",
		"End one of the agent's pairings (approved, pending or awaiting_consent) by its pairing_id: the human's spending policy stops applying and they stop deciding the agent's held operations at once; they are told.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in revokePairingInput) (httpx.Pairing, error) {
			v, err := t.svc.RevokeAgentPairing(ctx, a, in.PairingID)
			if err != nil {
				return httpx.Pairing{}, err
			}
			return httpx.PairingOf(v), nil
		}),
	define("get_limits",
		"The agent's tier, trust score, rate limits, per-send and daily limits with what is left today, and its permissions.",
		func(ctx context.Context, t *toolset, a *ent.Agent, _ noInput) (httpx.Limits, error) {
			l, err := t.svc.Limits(ctx, a)
			if err != nil {
				return httpx.Limits{}, err
			}
			return httpx.LimitsOf(a, l), nil
		}),
}

// toolDef is one tool of the table: its name and how to add it to a
// server.
type toolDef struct {
	name string
	tool *sdk.Tool
	// add registers it on the Go SDK's server (2025-11-25, modern.go
	// routes older clients there); invoke calls it with raw arguments
	// (2026-07-28, served by modern.go).
	add func(*sdk.Server, *toolset)
	// mayWait: the call may wait for a human (its answer is a
	// waitAnswer: a held operation, a card request), a task for a client
	// with the Tasks extension.
	mayWait bool
	invoke  func(ctx context.Context, t *toolset, a *ent.Agent, args json.RawMessage) (any, error)
}

// schemaOptions infer the tools' JSON schemas from their Go types: an
// amount is an exact JSON number.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[httpx.Amount](): {Type: "number"},
	reflect.TypeFor[time.Time]():    {Type: "string", Format: "date-time"},
}}

func jsonschemaFor[T any]() (*jsonschema.Schema, error) { return jsonschema.For[T](schemaOptions) }

// define makes a tool whose call runs as the authenticated agent, counted
// against its rate limit; an error is the tool's error with REST's detail.
func define[In, Out any](name, description string, call func(context.Context, *toolset, *ent.Agent, In) (Out, error)) toolDef {
	in, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema of %s: %v", name, err))
	}
	var out *jsonschema.Schema
	if u, ok := any(*new(Out)).(unionOutput); ok {
		out, err = u.outputSchema()
	} else {
		out, err = jsonschema.For[Out](schemaOptions)
	}
	if err != nil {
		panic(fmt.Sprintf("mcp: output schema of %s: %v", name, err))
	}
	tool := &sdk.Tool{Name: name, Description: description, InputSchema: in, OutputSchema: out}
	_, mayWait := any(*new(Out)).(waitAnswer)
	return toolDef{name: name, tool: tool, mayWait: mayWait,
		add: func(s *sdk.Server, t *toolset) {
			sdk.AddTool(s, tool, func(ctx context.Context, req *sdk.CallToolRequest, input In) (*sdk.CallToolResult, Out, error) {
				var zero Out
				a, err := t.agent(ctx, req)
				if err != nil {
					return nil, zero, t.toolError(ctx, name, err)
				}
				res, err := call(ctx, t, a, input)
				if err != nil {
					return nil, zero, t.toolError(ctx, name, err)
				}
				return nil, res, nil
			})
		},
		invoke: func(ctx context.Context, t *toolset, a *ent.Agent, args json.RawMessage) (any, error) {
			var input In
			if len(args) > 0 && string(args) != "null" {
				dec := json.NewDecoder(bytes.NewReader(args))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&input); err != nil {
					return nil, agentpay.Invalid("arguments", "%v", err)
				}
			}
			return call(ctx, t, a, input)
		}}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// noInput is a tool without arguments.
type noInput struct{}

type sendInput struct {
	ToUsername string       `json:"to_username" jsonschema:"the recipient's username"`
	AmountUSD  httpx.Amount `json:"amount_usd" jsonschema:"USD debited from the agent, at least 0.01, at most 6 decimals"`
	Memo       string       `json:"memo,omitempty" jsonschema:"a note for the recipient, at most 500 bytes"`
	Chain      string       `json:"chain,omitempty" jsonschema:"solana or base; by default the first of solana, base whose balance covers the amount"`
	// IdempotencyKey makes a retry safe, as REST's Idempotency-Key.
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"makes a retry safe: the same key with the same input answers the first result again (kept 24 hours)"`
}

func (t *toolset) send(ctx context.Context, a *ent.Agent, in sendInput, toUser bool) (orHeld[httpx.Transfer], error) {
	req := agentpay.SendRequest{ToUsername: in.ToUsername, ToUser: toUser, AmountUSD: in.AmountUSD.Decimal, Memo: in.Memo, Chain: in.Chain,
		IdempotencyKey: nonEmpty(in.IdempotencyKey)}
	res, _, err := t.svc.Send(ctx, a, req)
	if err != nil {
		return orHeld[httpx.Transfer]{}, err
	}
	if res.Approval != nil {
		return held[httpx.Transfer](httpx.ApprovalOf(res.Approval, res.Message)), nil
	}
	return done(httpx.TransferOf(res, toUser)), nil
}

// orHeld is the answer of a money tool a paired human's spending policy
// may hold: what REST answers with 200 (the operation done, a T) or with
// 202 (the approval it waits for), as the same JSON. An MCP result has no
// status code, so the output schema is either shape (anyOf) and a client
// tells them apart by approval_id or by status awaiting_approval.
type orHeld[T any] struct {
	done *T
	held *httpx.Approval
}

func done[T any](v T) orHeld[T]              { return orHeld[T]{done: &v} }
func held[T any](a httpx.Approval) orHeld[T] { return orHeld[T]{held: &a} }

// MarshalJSON writes the one answer o holds.
func (o orHeld[T]) MarshalJSON() ([]byte, error) {
	if o.held != nil {
		return json.Marshal(o.held)
	}
	return json.Marshal(o.done)
}

// unionOutput is an output whose schema is not its Go type's.
type unionOutput interface {
	outputSchema() (*jsonschema.Schema, error)
}

func (orHeld[T]) outputSchema() (*jsonschema.Schema, error) {
	d, err := jsonschema.For[T](schemaOptions)
	if err != nil {
		return nil, err
	}
	h, err := jsonschema.For[httpx.Approval](schemaOptions)
	if err != nil {
		return nil, err
	}
	return &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{d, h}}, nil
}

type payCheckoutInput struct {
	ExternalID     string `json:"external_id" jsonschema:"the session's external id (cs_test_... or cs_live_...), the last part of its checkout_url"`
	Chain          string `json:"chain,omitempty" jsonschema:"solana or base; by default the first of solana, base that the merchant accepts and the balance covers"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"makes a retry safe: the same key answers the first payment as it is now (kept 24 hours)"`
}

type revokePairingInput struct {
	PairingID string `json:"pairing_id" jsonschema:"the pairing to end, as list_pairings names it"`
}

type cardPurchaseInput struct {
	AmountUSD      httpx.Amount `json:"amount_usd" jsonschema:"the card's maximum in USD, 0.50 to the per-send limit, whole cents"`
	MerchantName   string       `json:"merchant_name" jsonschema:"the merchant the card is bound to"`
	Description    string       `json:"description" jsonschema:"what the purchase is, shown to the human"`
	UserID         string       `json:"user_id,omitempty" jsonschema:"the human to ask, when several qualify"`
	IdempotencyKey string       `json:"idempotency_key,omitempty" jsonschema:"makes a retry safe: the same key answers the first request"`
}
