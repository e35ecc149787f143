package mcp

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"agentpay"
	"agentpay/ent"
	"agentpay/rest"
)

// tools is the agent's tool table, in the order tools/list shows them.
var tools = []toolDef{
	define("get_balance",
		"The agent's USDC balance on each chain it holds a wallet on, read from the chains now, and the exact total in USD.",
		func(ctx context.Context, t *toolset, a *ent.Agent, _ noInput) (balanceOutput, error) {
			b, err := t.svc.Balance(ctx, a)
			if err != nil {
				return balanceOutput{}, err
			}
			return balanceOf(a, b), nil
		}),
	define("send",
		"Send USDC to another agent by username (0.1% treasury fee; the recipient receives amount_usd less the fee). Gasless; within the agent's per-send and daily limits; never more than the available balance.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in sendInput) (transferOutput, error) {
			return t.send(ctx, a, in, false)
		}),
	define("send_to_user",
		"Send USDC to a human user's custodial wallet by username: every rule of send.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in sendInput) (transferOutput, error) {
			return t.send(ctx, a, in, true)
		}),
	define("pay_checkout",
		"Pay an agentpay checkout session (its external id, cs_test_... or cs_live_..., from its checkout_url) with its exact amount from the agent's wallet, gasless, within the agent's limits; answers the payment with its status (detected once included, then confirming and confirmed as the chain confirms).",
		func(ctx context.Context, t *toolset, a *ent.Agent, in payCheckoutInput) (checkoutPaymentOutput, error) {
			req := agentpay.PayCheckoutRequest{ExternalID: in.ExternalID, Chain: in.Chain, IdempotencyKey: nonEmpty(in.IdempotencyKey)}
			res, _, err := t.svc.PayCheckout(ctx, a, req)
			if err != nil {
				return checkoutPaymentOutput{}, err
			}
			return checkoutPaymentOf(res), nil
		}),
	define("request_card_purchase",
		"Ask the paired, identity-verified human to approve a card purchase: amount_usd (0.50 to the per-send limit, whole cents) at merchant_name. The human approves or denies in the app; once approved the agent reads its one-time card (ctok_...) with GET /agents/me/pairings/card/requests/{request_id} (details shown once). Answers the request, pending_approval.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in cardPurchaseInput) (cardRequestOutput, error) {
			req := agentpay.CardPurchaseRequest{AmountUSD: in.AmountUSD.Decimal, MerchantName: in.MerchantName, Description: in.Description, UserID: in.UserID,
				IdempotencyKey: nonEmpty(in.IdempotencyKey)}
			v, _, err := t.svc.RequestCardPurchase(ctx, a, req)
			if err != nil {
				return cardRequestOutput{}, err
			}
			r := v.Request
			return cardRequestOutput{
				RequestID: r.ID.String(), Status: v.Status(), AmountUSD: rest.Amount{Decimal: v.Amount()},
				MerchantName: r.MerchantName, Description: r.Description, UserID: r.UserID.String(), Username: v.Username,
				CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
			}, nil
		}),
	define("list_pairings",
		"The agent's pairings with human users (pending, awaiting_consent, approved, denied, revoked or expired), newest first.",
		func(ctx context.Context, t *toolset, a *ent.Agent, _ noInput) (pairingsOutput, error) {
			vs, err := t.svc.AgentPairings(ctx, a)
			if err != nil {
				return pairingsOutput{}, err
			}
			out := pairingsOutput{AgentID: a.ID.String(), Pairings: make([]pairingOutput, len(vs))}
			for i, v := range vs {
				out.Pairings[i] = pairingOf(v)
			}
			return out, nil
		}),
	define("revoke_pairing",
		"End one of the agent's pairings (approved, pending or awaiting_consent) by its pairing_id: the human's spending policy stops applying and they stop deciding the agent's held operations at once; they are told.",
		func(ctx context.Context, t *toolset, a *ent.Agent, in revokePairingInput) (pairingOutput, error) {
			v, err := t.svc.RevokeAgentPairing(ctx, a, in.PairingID)
			if err != nil {
				return pairingOutput{}, err
			}
			return pairingOf(v), nil
		}),
	define("get_limits",
		"The agent's tier, trust score, rate limits, per-send and daily limits with what is left today, and its permissions.",
		func(ctx context.Context, t *toolset, a *ent.Agent, _ noInput) (limitsOutput, error) {
			l, err := t.svc.Limits(ctx, a)
			if err != nil {
				return limitsOutput{}, err
			}
			return limitsOf(a, l), nil
		}),
}

// toolDef is one tool of the table: its name and how to add it to a
// server.
type toolDef struct {
	name string
	add  func(*sdk.Server, *toolset)
}

// schemaOptions infer the tools' JSON schemas from their Go types: an
// amount is an exact JSON number.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[rest.Amount](): {Type: "number"},
	reflect.TypeFor[time.Time]():   {Type: "string", Format: "date-time"},
}}

// define makes a tool whose call runs as the authenticated agent, counted
// against its rate limit; an error is the tool's error with REST's detail.
func define[In, Out any](name, description string, call func(context.Context, *toolset, *ent.Agent, In) (Out, error)) toolDef {
	in, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema of %s: %v", name, err))
	}
	out, err := jsonschema.For[Out](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcp: output schema of %s: %v", name, err))
	}
	return toolDef{name: name, add: func(s *sdk.Server, t *toolset) {
		tool := &sdk.Tool{Name: name, Description: description, InputSchema: in, OutputSchema: out}
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
	ToUsername string      `json:"to_username" jsonschema:"the recipient's username"`
	AmountUSD  rest.Amount `json:"amount_usd" jsonschema:"USD debited from the agent, at least 0.01, at most 6 decimals"`
	Memo       string      `json:"memo,omitempty" jsonschema:"a note for the recipient, at most 500 bytes"`
	Chain      string      `json:"chain,omitempty" jsonschema:"solana or base; by default the first of solana, base whose balance covers the amount"`
	// IdempotencyKey makes a retry safe, as REST's Idempotency-Key.
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"makes a retry safe: the same key with the same input answers the first result again (kept 24 hours)"`
}

func (t *toolset) send(ctx context.Context, a *ent.Agent, in sendInput, toUser bool) (transferOutput, error) {
	req := agentpay.SendRequest{ToUsername: in.ToUsername, ToUser: toUser, AmountUSD: in.AmountUSD.Decimal, Memo: in.Memo, Chain: in.Chain,
		IdempotencyKey: nonEmpty(in.IdempotencyKey)}
	res, _, err := t.svc.Send(ctx, a, req)
	if err != nil {
		return transferOutput{}, err
	}
	if res.Approval != nil {
		out := transferOutput{ApprovalID: res.Approval.Approval.ID.String(), FromAgent: res.FromUsername, ToAgent: res.ToUsername,
			AmountUSD: rest.Amount{Decimal: res.Amount}, Status: res.Status, Message: res.Message}
		if toUser {
			out.ToAgent, out.ToUser = "", res.ToUsername
		}
		return out, nil
	}
	out := transferOutput{
		TransactionID: res.Transfer.ID.String(), FromAgent: res.FromUsername,
		AmountUSD: rest.Amount{Decimal: res.Delivered}, FeeUSD: rest.Amount{Decimal: res.Fee},
		Chain: string(res.Chain), TxHash: res.TxHash, Status: res.Status, Message: res.Message,
	}
	if toUser {
		out.ToUser = res.ToUsername
	} else {
		out.ToAgent = res.ToUsername
	}
	return out, nil
}

// transferOutput is REST's Transfer (spec 2.3), with the fee.
type transferOutput struct {
	TransactionID string `json:"transaction_id,omitempty" jsonschema:"absent while a spending policy holds the send for approval"`
	ApprovalID    string `json:"approval_id,omitempty" jsonschema:"set when a paired human's spending policy holds the send (status awaiting_approval)"`
	FromAgent     string `json:"from_agent"`
	ToAgent       string `json:"to_agent,omitempty"`
	ToUser        string `json:"to_user,omitempty"`
	// AmountUSD is what the recipient receives, after the fee.
	AmountUSD rest.Amount `json:"amount_usd" jsonschema:"USD delivered to the recipient, after the fee"`
	FeeUSD    rest.Amount `json:"fee_usd" jsonschema:"USD routed to the treasury"`
	Chain     string      `json:"chain"`
	TxHash    string      `json:"tx_hash,omitempty"`
	Status    string      `json:"status" jsonschema:"completed, or pending while not yet included"`
	Message   string      `json:"message"`
}

type balanceOutput struct {
	AgentID  string          `json:"agent_id"`
	Username string          `json:"username"`
	Balances []chainBalanceO `json:"balances"`
	TotalUSD rest.Amount     `json:"total_usd"`
}

type chainBalanceO struct {
	Chain   string      `json:"chain"`
	Token   string      `json:"token"`
	Balance rest.Amount `json:"balance"`
	Address string      `json:"address"`
}

func balanceOf(a *ent.Agent, b *agentpay.Balance) balanceOutput {
	out := balanceOutput{AgentID: a.ID.String(), Username: a.Username, TotalUSD: rest.Amount{Decimal: b.TotalUSD},
		Balances: make([]chainBalanceO, len(b.Balances))}
	for i, cb := range b.Balances {
		out.Balances[i] = chainBalanceO{Chain: string(cb.Chain), Token: cb.Token, Balance: rest.Amount{Decimal: cb.Balance}, Address: cb.Address}
	}
	return out
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
	AmountUSD      rest.Amount `json:"amount_usd" jsonschema:"the card's maximum in USD, 0.50 to the per-send limit, whole cents"`
	MerchantName   string      `json:"merchant_name" jsonschema:"the merchant the card is bound to"`
	Description    string      `json:"description" jsonschema:"what the purchase is, shown to the human"`
	UserID         string      `json:"user_id,omitempty" jsonschema:"the human to ask, when several qualify"`
	IdempotencyKey string      `json:"idempotency_key,omitempty" jsonschema:"makes a retry safe: the same key answers the first request"`
}

// cardRequestOutput is REST's request-purchase answer.
type cardRequestOutput struct {
	RequestID    string      `json:"request_id"`
	Status       string      `json:"status"`
	AmountUSD    rest.Amount `json:"amount_usd"`
	MerchantName string      `json:"merchant_name"`
	Description  string      `json:"description"`
	UserID       string      `json:"user_id"`
	Username     string      `json:"username"`
	CreatedAt    time.Time   `json:"created_at"`
	ExpiresAt    time.Time   `json:"expires_at"`
}

// checkoutPaymentOutput is REST's agent-pay answer.
type checkoutPaymentOutput struct {
	TransactionID         string      `json:"transaction_id,omitempty" jsonschema:"absent while a spending policy holds the payment for approval"`
	ApprovalID            string      `json:"approval_id,omitempty" jsonschema:"set when a paired human's spending policy holds the payment (status awaiting_approval)"`
	PaymentID             string      `json:"payment_id,omitempty" jsonschema:"the session's payment (pay_...), absent until the transfer is included"`
	SessionID             string      `json:"session_id"`
	SessionStatus         string      `json:"session_status"`
	Status                string      `json:"status" jsonschema:"pending, detected, confirming, confirmed or failed"`
	AmountUSD             rest.Amount `json:"amount_usd"`
	Chain                 string      `json:"chain"`
	TxHash                string      `json:"tx_hash,omitempty"`
	FromAddress           string      `json:"from_address"`
	ToAddress             string      `json:"to_address"`
	Confirmations         int         `json:"confirmations"`
	RequiredConfirmations uint64      `json:"required_confirmations,omitempty"`
	Message               string      `json:"message"`
}

func checkoutPaymentOf(res *agentpay.CheckoutPayment) checkoutPaymentOutput {
	if res.Approval != nil {
		return checkoutPaymentOutput{ApprovalID: res.Approval.Approval.ID.String(), SessionID: res.Approval.Approval.Recipient,
			Status: res.Status, AmountUSD: rest.Amount{Decimal: res.AmountUSD}, Message: res.Message}
	}
	out := checkoutPaymentOutput{
		TransactionID: res.Transfer.ID.String(), SessionID: res.Session.ExternalID, SessionStatus: string(res.Session.Status),
		Status: res.Status, AmountUSD: rest.Amount{Decimal: res.AmountUSD}, Chain: string(res.Chain),
		TxHash: res.Transfer.TxHash, FromAddress: res.Transfer.FromAddress, ToAddress: res.Transfer.ToAddress,
		Confirmations: res.Confirmations, RequiredConfirmations: res.Required, Message: res.Message,
	}
	if res.Payment != nil {
		out.PaymentID = res.Payment.ExternalID
	}
	return out
}

type pairingsOutput struct {
	AgentID  string          `json:"agent_id"`
	Pairings []pairingOutput `json:"pairings"`
}

type pairingOutput struct {
	PairingID   string     `json:"pairing_id"`
	UserID      string     `json:"user_id"`
	Username    string     `json:"username"`
	DisplayName string     `json:"display_name"`
	Status      string     `json:"status"`
	KYCVerified bool       `json:"kyc_verified"`
	Message     string     `json:"message"`
	CreatedAt   time.Time  `json:"created_at"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

func pairingOf(v *agentpay.PairingView) pairingOutput {
	p := v.Pairing
	return pairingOutput{
		PairingID: p.ID.String(), UserID: p.UserID.String(), Username: v.User.Username, DisplayName: v.User.DisplayName,
		Status: v.Status, KYCVerified: v.KYCVerified(), Message: p.Message,
		CreatedAt: p.CreatedAt, DecidedAt: p.DecidedAt, ExpiresAt: p.ExpiresAt,
	}
}

type limitsOutput struct {
	AgentID           string      `json:"agent_id"`
	Tier              string      `json:"tier"`
	TrustScore        int         `json:"trust_score"`
	RequestsPerMinute int         `json:"requests_per_minute"`
	RequestsPerHour   int         `json:"requests_per_hour"`
	PerSendUSD        rest.Amount `json:"per_send_usd"`
	DailyUSD          rest.Amount `json:"daily_usd"`
	SentTodayUSD      rest.Amount `json:"sent_today_usd"`
	RemainingTodayUSD rest.Amount `json:"remaining_today_usd"`
	DayResetsAt       time.Time   `json:"day_resets_at"`
	NextTier          string      `json:"next_tier,omitempty"`
	NextTierScore     int         `json:"next_tier_score,omitempty"`
	CanSend           bool        `json:"can_send"`
	CanReceive        bool        `json:"can_receive"`
	CardPurchases     bool        `json:"card_purchases"`
}

func limitsOf(a *ent.Agent, l *agentpay.AgentLimits) limitsOutput {
	return limitsOutput{
		AgentID: a.ID.String(), Tier: l.Tier, TrustScore: l.TrustScore,
		RequestsPerMinute: l.Limits.PerMinute, RequestsPerHour: l.Limits.PerHour,
		PerSendUSD: rest.Amount{Decimal: l.Limits.PerSend}, DailyUSD: rest.Amount{Decimal: l.Limits.Daily},
		SentTodayUSD: rest.Amount{Decimal: l.SentToday}, RemainingTodayUSD: rest.Amount{Decimal: l.RemainingToday},
		DayResetsAt: l.DayResetsAt.UTC(), NextTier: l.NextTier, NextTierScore: l.NextTierScore,
		CanSend: l.CanSend, CanReceive: l.CanReceive, CardPurchases: l.CardPurchases,
	}
}
