package httpx

import (
	"time"

	"agentpay"
	"agentpay/ent"
)

// The answers REST and MCP give alike (docs/architecture.md, "One wire
// vocabulary"): REST writes them as its bodies, MCP as its tools'
// structured content (whose output schemas are inferred from these
// types), so the two never drift apart. Each is built from the service's
// view by its ...Of function; the field names and null rules are REST's
// (the spec's), held by REST's golden files.

// Balance is the Balance of spec 2.2: GET /agents/me/wallet/balance, MCP
// get_balance.
type Balance struct {
	AgentID  string         `json:"agent_id"`
	Username string         `json:"username"`
	Balances []ChainBalance `json:"balances"`
	TotalUSD Amount         `json:"total_usd"`
}

// ChainBalance is the USDC one wallet holds on one chain.
type ChainBalance struct {
	Chain   string `json:"chain"`
	Token   string `json:"token"`
	Balance Amount `json:"balance"`
	Address string `json:"address"`
}

// BalanceOf is b as answered.
func BalanceOf(b *agentpay.Balance) Balance {
	out := Balance{
		AgentID:  b.Agent.ID.String(),
		Username: b.Agent.Username,
		Balances: make([]ChainBalance, len(b.Balances)),
		TotalUSD: USD(b.TotalUSD),
	}
	for i, cb := range b.Balances {
		out.Balances[i] = ChainBalance{Chain: string(cb.Chain), Token: cb.Token, Balance: USD(cb.Balance), Address: cb.Address}
	}
	return out
}

// Transfer is the Transfer of spec 2.3, a send's answer (REST's 200, MCP
// send and send_to_user); a send to a user answers to_user in place of
// to_agent.
type Transfer struct {
	TransactionID string `json:"transaction_id"`
	FromAgent     string `json:"from_agent"`
	ToAgent       string `json:"to_agent,omitempty"`
	ToUser        string `json:"to_user,omitempty"`
	// AmountUSD is what the recipient receives, after the treasury fee.
	AmountUSD Amount `json:"amount_usd"`
	Chain     string `json:"chain"`
	TxHash    string `json:"tx_hash"`
	// Status is completed, or pending while not yet included.
	Status  string `json:"status"`
	Message string `json:"message"`
}

// TransferOf is the send res (done, not held) as answered.
func TransferOf(res *agentpay.SendResult, toUser bool) Transfer {
	out := Transfer{
		TransactionID: res.Transfer.ID.String(),
		FromAgent:     res.FromUsername,
		AmountUSD:     USD(res.Delivered),
		Chain:         string(res.Chain),
		TxHash:        res.TxHash,
		Status:        res.Status,
		Message:       res.Message,
	}
	if toUser {
		out.ToUser = res.ToUsername
	} else {
		out.ToAgent = res.ToUsername
	}
	return out
}

// CheckoutPayment is an agent's checkout payment (docs/agent-commerce.md):
// POST /checkout/pay/{external_id}/agent-pay's 200, MCP pay_checkout.
type CheckoutPayment struct {
	// TransactionID is the agent's transfer (as in its transfers list).
	TransactionID string `json:"transaction_id"`
	// PaymentID is the session's payment, null until it is recorded.
	PaymentID     *string `json:"payment_id"`
	SessionID     string  `json:"session_id"`
	SessionStatus string  `json:"session_status"`
	// Status is pending, detected, confirming, confirmed or failed.
	Status    string `json:"status"`
	AmountUSD Amount `json:"amount_usd"`
	Chain     string `json:"chain"`
	// TxHash is null until included, and for a payment settled on the
	// internal ledger, which carries InternalReference instead.
	TxHash *string `json:"tx_hash"`
	// InternalReference ("internal:<transaction_id>") is set for a
	// payment settled on the internal ledger (docs/money.md).
	InternalReference *string `json:"internal_reference,omitempty"`
	FromAddress       string  `json:"from_address"`
	ToAddress         string  `json:"to_address"`
	Confirmations     int     `json:"confirmations"`
	// RequiredConfirmations is null when the chain does not say.
	RequiredConfirmations *uint64 `json:"required_confirmations"`
	Message               string  `json:"message"`
}

// CheckoutPaymentOf is the payment res (done, not held) as answered.
func CheckoutPaymentOf(res *agentpay.CheckoutPayment) CheckoutPayment {
	out := CheckoutPayment{
		TransactionID: res.Transfer.ID.String(),
		SessionID:     res.Session.ExternalID,
		SessionStatus: string(res.Session.Status),
		Status:        res.Status,
		AmountUSD:     USD(res.AmountUSD),
		Chain:         string(res.Chain),
		FromAddress:   res.Transfer.FromAddress,
		ToAddress:     res.Transfer.ToAddress,
		Confirmations: res.Confirmations,
		Message:       res.Message,
	}
	if res.Payment != nil {
		out.PaymentID = &res.Payment.ExternalID
	}
	if h := res.TxHash(); h != "" {
		out.TxHash = &h
	}
	if ref := res.InternalReference(); ref != "" {
		out.InternalReference = &ref
	}
	if res.Required > 0 {
		out.RequiredConfirmations = &res.Required
	}
	return out
}

// Approval is an operation a paired human's spending policy held for
// approval (docs/agent-commerce.md, "Spending policies"): the answer of the
// send, send-to-user or agent-pay it held (REST's 202, the MCP tool's
// answer), and GET /agents/me/approvals/{approval_id}.
type Approval struct {
	ApprovalID string `json:"approval_id"`
	// Operation is send, send_to_user or pay_checkout.
	Operation string `json:"operation"`
	// Status is awaiting_approval, approved, denied, expired or failed.
	Status    string `json:"status"`
	AmountUSD Amount `json:"amount_usd"`
	// Recipient is the username paid, or the checkout session's id.
	Recipient string     `json:"recipient"`
	Reason    string     `json:"reason"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at"`
	// TransactionID, TransferStatus and TxHash: the transfer the approved
	// operation recorded, as it is now (null before).
	TransactionID  *string `json:"transaction_id"`
	TransferStatus *string `json:"transfer_status"`
	TxHash         *string `json:"tx_hash"`
	// Error: why the approved operation was refused when it ran.
	Error *string `json:"error"`
	// Deciders are the humans whose policies held it (usernames): each
	// must approve; ApprovedBy those who did so far.
	Deciders   []string `json:"deciders"`
	ApprovedBy []string `json:"approved_by"`
	Message    string   `json:"message,omitempty"`
}

// ApprovalOf is v as answered, with the message of the operation it held
// ("" when read later).
func ApprovalOf(v *agentpay.SpendApprovalView, message string) Approval {
	a := v.Approval
	out := Approval{
		ApprovalID: a.ID.String(), Operation: string(a.Operation), Status: v.Status(), AmountUSD: USD(v.Amount()),
		Recipient: a.Recipient, Reason: a.Reason, CreatedAt: a.CreatedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
		Deciders: nonNil(v.Deciders), ApprovedBy: nonNil(v.ApprovedBy), Message: message,
	}
	if a.DecidedAt != nil {
		d := a.DecidedAt.UTC()
		out.DecidedAt = &d
	}
	if t := v.Transfer; t != nil {
		id, st := t.ID.String(), string(t.Status)
		out.TransactionID, out.TransferStatus = &id, &st
		if h := agentpay.ChainTxHash(t.TxHash); h != "" {
			out.TxHash = &h
		}
	}
	if a.Error != "" {
		out.Error = &a.Error
	}
	return out
}

// nonNil is list, or an empty list for nil (JSON [] rather than null).
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// Pairing is one of an agent's pairings with a human as the agent sees it:
// GET /agents/me/pairings (MCP list_pairings), the revoke's answer (MCP
// revoke_pairing).
type Pairing struct {
	PairingID   string `json:"pairing_id"`
	UserID      string `json:"user_id"`
	Username    string `json:"username"`
	DisplayName string `json:"display_name"`
	// Status is pending, awaiting_consent, approved, denied, revoked or
	// expired.
	Status      string     `json:"status"`
	KYCVerified bool       `json:"kyc_verified"`
	Message     string     `json:"message"`
	CreatedAt   time.Time  `json:"created_at"`
	DecidedAt   *time.Time `json:"decided_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
}

// PairingOf is v as answered.
func PairingOf(v *agentpay.PairingView) Pairing {
	p := v.Pairing
	return Pairing{
		PairingID:   p.ID.String(),
		UserID:      p.UserID.String(),
		Username:    v.User.Username,
		DisplayName: v.User.DisplayName,
		Status:      v.Status,
		KYCVerified: v.KYCVerified(),
		Message:     p.Message,
		CreatedAt:   p.CreatedAt,
		DecidedAt:   p.DecidedAt,
		ExpiresAt:   p.ExpiresAt,
	}
}

// Pairings is an agent's pairings, newest first.
type Pairings struct {
	AgentID  string    `json:"agent_id"`
	Pairings []Pairing `json:"pairings"`
}

// PairingsOf is a's pairings vs as answered.
func PairingsOf(a *ent.Agent, vs []*agentpay.PairingView) Pairings {
	out := Pairings{AgentID: a.ID.String(), Pairings: make([]Pairing, len(vs))}
	for i, v := range vs {
		out.Pairings[i] = PairingOf(v)
	}
	return out
}

// CardRequest is an agent's card purchase request (docs/identity-and-
// cards.md): the request-purchase answer (MCP request_card_purchase) and
// the agent's reads of it.
type CardRequest struct {
	RequestID    string     `json:"request_id"`
	Status       string     `json:"status"`
	AmountUSD    Amount     `json:"amount_usd"`
	MerchantName string     `json:"merchant_name"`
	Description  string     `json:"description"`
	UserID       string     `json:"user_id"`
	Username     string     `json:"username"`
	CreatedAt    time.Time  `json:"created_at"`
	ExpiresAt    time.Time  `json:"expires_at"`
	DecidedAt    *time.Time `json:"decided_at"`
	Card         *Card      `json:"card"`
	ChargedUSD   *Amount    `json:"charged_usd"`
	ReturnedUSD  *Amount    `json:"returned_usd"`
	ReturnTxHash string     `json:"return_tx_hash,omitempty"`
	Error        string     `json:"error,omitempty"`
}

// Card is the card of an approved request.
type Card struct {
	Token     string       `json:"card_token"`
	Last4     string       `json:"last4"`
	MaxUSD    Amount       `json:"max_amount_usd"`
	Merchant  string       `json:"merchant_name"`
	ExpiresAt *time.Time   `json:"expires_at"`
	Details   *CardDetails `json:"details,omitempty"`
	// Revealed: the details were shown (in this answer or an earlier one).
	Revealed bool `json:"revealed"`
}

// CardDetails are the card's secrets, in the one answer that shows them.
type CardDetails struct {
	Number   string `json:"number"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	CVC      string `json:"cvc"`
}

// CardRequestOf is v as answered: the card's details only when v carries
// them (the one read that reveals them).
func CardRequestOf(v *agentpay.CardRequestView) CardRequest {
	r := v.Request
	out := CardRequest{
		RequestID: r.ID.String(), Status: v.Status(), AmountUSD: USD(v.Amount()),
		MerchantName: r.MerchantName, Description: r.Description, UserID: r.UserID.String(), Username: v.Username,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, DecidedAt: r.DecidedAt, Error: r.Error,
	}
	if r.CardToken != nil {
		out.Card = &Card{
			Token: *r.CardToken, Last4: r.CardLast4, MaxUSD: USD(v.Amount()), Merchant: r.MerchantName,
			ExpiresAt: r.CardExpiresAt, Revealed: r.CardRevealedAt != nil,
		}
		if d := v.Details; d != nil {
			out.Card.Details = &CardDetails{Number: d.Number, ExpMonth: d.ExpMonth, ExpYear: d.ExpYear, CVC: d.CVC}
		}
	}
	if r.ChargedAmount != nil {
		charged := USD(agentpay.USDCAmount(*r.ChargedAmount))
		out.ChargedUSD = &charged
	}
	if r.RefundedAt != nil {
		returned := USD(agentpay.USDCAmount(r.RefundAmount))
		out.ReturnedUSD = &returned
		out.ReturnTxHash = r.RefundTxHash
	}
	return out
}

// Limits is an agent's tier, limits and what is left of them: GET
// /agents/me/limits, MCP get_limits.
type Limits struct {
	AgentID     string        `json:"agent_id"`
	Tier        string        `json:"tier"`
	TrustScore  int           `json:"trust_score"`
	RateLimits  RateLimits    `json:"rate_limits"`
	SendLimits  SendLimits    `json:"send_limits"`
	Permissions Permissions   `json:"permissions"`
	NextTier    *NextTier     `json:"next_tier"`
	RaiseTier   []TrustAction `json:"raise_tier"`
	Tiers       []Tier        `json:"tiers"`
}

// RateLimits are the requests an agent's tier allows.
type RateLimits struct {
	RequestsPerMinute int `json:"requests_per_minute"`
	RequestsPerHour   int `json:"requests_per_hour"`
}

// SendLimits are an agent's send limits and what it sent today.
type SendLimits struct {
	PerSendUSD        Amount    `json:"per_send_usd"`
	DailyUSD          Amount    `json:"daily_usd"`
	SentTodayUSD      Amount    `json:"sent_today_usd"`
	RemainingTodayUSD Amount    `json:"remaining_today_usd"`
	DayResetsAt       time.Time `json:"day_resets_at"`
}

// Permissions are what an agent may do now.
type Permissions struct {
	Send          bool `json:"send"`
	Receive       bool `json:"receive"`
	CardPurchases bool `json:"card_purchases"`
}

// NextTier is the tier above an agent's and the score it takes.
type NextTier struct {
	Tier         string `json:"tier"`
	MinScore     int    `json:"min_score"`
	PointsNeeded int    `json:"points_needed"`
}

// TrustAction is one way to raise the trust score.
type TrustAction struct {
	Action string `json:"action"`
	Points int    `json:"points"`
	Earned int    `json:"earned"`
	Done   bool   `json:"done"`
	How    string `json:"how"`
}

// Tier is one tier's floor and limits.
type Tier struct {
	Tier              string `json:"tier"`
	MinScore          int    `json:"min_score"`
	RequestsPerMinute int    `json:"requests_per_minute"`
	RequestsPerHour   int    `json:"requests_per_hour"`
	PerSendUSD        Amount `json:"per_send_usd"`
	DailyUSD          Amount `json:"daily_usd"`
}

// LimitsOf is a's limits l as answered.
func LimitsOf(a *ent.Agent, l *agentpay.AgentLimits) Limits {
	out := Limits{
		AgentID:    a.ID.String(),
		Tier:       l.Tier,
		TrustScore: l.TrustScore,
		RateLimits: RateLimits{RequestsPerMinute: l.Limits.PerMinute, RequestsPerHour: l.Limits.PerHour},
		SendLimits: SendLimits{
			PerSendUSD:        USD(l.Limits.PerSend),
			DailyUSD:          USD(l.Limits.Daily),
			SentTodayUSD:      USD(l.SentToday),
			RemainingTodayUSD: USD(l.RemainingToday),
			DayResetsAt:       l.DayResetsAt.UTC(),
		},
		Permissions: Permissions{Send: l.CanSend, Receive: l.CanReceive, CardPurchases: l.CardPurchases},
		RaiseTier:   make([]TrustAction, 0, len(l.Raise)),
		Tiers:       make([]Tier, 0, len(agentpay.Tiers)),
	}
	if l.NextTier != "" {
		out.NextTier = &NextTier{Tier: l.NextTier, MinScore: l.NextTierScore, PointsNeeded: l.NextTierScore - l.TrustScore}
	}
	for _, act := range l.Raise {
		out.RaiseTier = append(out.RaiseTier, TrustAction{
			Action: act.Action, Points: act.Points, Earned: act.Earned, Done: act.Done, How: RenderREST(act.How),
		})
	}
	for _, t := range agentpay.Tiers {
		tl := agentpay.LimitsFor(t)
		out.Tiers = append(out.Tiers, Tier{
			Tier: t, MinScore: agentpay.TierFloor(t),
			RequestsPerMinute: tl.PerMinute, RequestsPerHour: tl.PerHour,
			PerSendUSD: USD(tl.PerSend), DailyUSD: USD(tl.Daily),
		})
	}
	return out
}

// X402Paid is a payment of a checkout session settled from a payer's
// signed authorization: REST's answer to a paid GET /checkout/{id}/x402 and
// to an MPP credential, MCP pay_checkout_x402's result.
type X402Paid struct {
	ExternalID    string  `json:"external_id"`
	SessionStatus string  `json:"session_status"`
	Status        string  `json:"status"`
	PaymentID     *string `json:"payment_id"`
	Chain         string  `json:"chain"`
	TxHash        string  `json:"tx_hash"`
	Payer         string  `json:"payer"`
	AmountUSD     Amount  `json:"amount_usd"`
	Replayed      bool    `json:"replayed"`
}

// X402PaidOf is the answer of a settled x402 payment.
func X402PaidOf(res *agentpay.AuthorizedPayment) X402Paid {
	out := X402Paid{
		ExternalID: res.Session.ExternalID, SessionStatus: string(res.Session.Status), Status: res.Status,
		Chain: string(res.Chain), TxHash: res.TxHash, Payer: res.Payer, AmountUSD: Amount{Decimal: res.AmountUSD}, Replayed: res.Replayed,
	}
	if res.Payment != nil {
		out.PaymentID = &res.Payment.ExternalID
	}
	return out
}
