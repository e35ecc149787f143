package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"agentpay/ent"
	"agentpay/ent/cardrequest"
	"agentpay/internal/vault"
)

// Card purchases (spec 4.2, design.md 6, docs/identity-and-cards.md): an
// agent asks its paired, identity-verified human to approve a purchase;
// on approval the amount is reserved and a single-use virtual card bound
// to it is issued; the agent reads the card once and the merchant charges
// it; what the charge leaves, or a card that expires unused, returns.
//
//	pending_approval -> approved -> used | expired_unused
//	pending_approval -> denied | expired
//	approved -> failed   (the reservation did not go through: nothing moved)
//
// Who moves it: the agent makes the request; the human approves or denies
// (ApproveCardRequest, DenyCardRequest); the card network's authorization
// moves an approved request to used (AuthorizeCardCharge); the worker's
// cards job (CardsTick) moves the ones whose time ran out and finishes
// what a crash left (issuing, returning money). Every move is a
// conditional update from the state it leaves, so of two racing moves
// (approve and expire, two approvals, two charges) exactly one happens.
//
// The money: approval records, in the transaction that moves the request
// to approved, a transfer of the whole amount (no fee) from the agent's
// wallet to the treasury, gasless as sends are (transfer_agent_sends.go), under the
// wallet lock and the no-overdraft rule; the card is issued once it is
// included. The return (amount - charged, or all of it) goes from the
// treasury to the wallet the reservation left, with a fixed ref per
// request (the EIP-3009 nonce on Base, looked up before any resend on
// Solana), so it is paid once however often the job runs.

// DefaultCardRequestTTL is how long a request waits for the human
// (CARD_REQUEST_TTL).
const DefaultCardRequestTTL = 30 * time.Minute

// MaxCardLifetime is the longest an issued card works.
const MaxCardLifetime = 24 * time.Hour

// MinCardPurchaseUSD is the smallest card purchase.
var MinCardPurchaseUSD = decimal.New(50, -2)

// Bounds of a request's text (characters).
const (
	CardMerchantMaxLen    = 200
	CardDescriptionMaxLen = 1000
)

// Card request statuses.
const (
	CardPendingApproval = "pending_approval"
	CardApproved        = "approved"
	CardDenied          = "denied"
	CardExpired         = "expired"
	CardFailed          = "failed"
	CardUsed            = "used"
	CardExpiredUnused   = "expired_unused"
)

// Account event kinds of card purchases: to the agent and, as a line of
// their history, to the human.
const (
	EventCardRequested = "card.requested" // to the human
	EventCardApproved  = "card.approved"
	EventCardDenied    = "card.denied"
	EventCardExpired   = "card.expired" // the request lapsed undecided
	EventCardFailed    = "card.failed"
	EventCardIssued    = "card.issued"
	EventCardCharged   = "card.charged"
	// EventCardExpiredUnused: the card expired with no charge.
	EventCardExpiredUnused = "card.expired_unused"
	// EventCardReturned: the unspent amount reached the agent's wallet.
	EventCardReturned = "card.returned"
)

// ctokFormat is the shape of card tokens: ctok_ and 32 base62 characters.
var ctokFormat = vault.IDFormat{Prefix: "ctok_", Alphabet: "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", Length: 32}

// ErrCardsOff: no card issuer is configured.
var ErrCardsOff = fmt.Errorf("%w: card purchases are not configured on this service", ErrUnavailable)

func (s *Service) cardRequestTTL() time.Duration {
	if s.cfg.CardRequestTTL > 0 {
		return s.cfg.CardRequestTTL
	}
	return DefaultCardRequestTTL
}

func (s *Service) cardLifetime() time.Duration {
	if s.cfg.CardLifetime > 0 && s.cfg.CardLifetime < MaxCardLifetime {
		return s.cfg.CardLifetime
	}
	return MaxCardLifetime
}

// CardsOn reports whether card purchases are configured.
func (s *Service) CardsOn() bool { return s.cfg.CardIssuer != nil }

// CardPurchaseRequest is an agent's request-purchase.
type CardPurchaseRequest struct {
	AmountUSD    decimal.Decimal
	MerchantName string
	Description  string
	// UserID picks the human when several qualify ("" when one does).
	UserID string
	// IdempotencyKey makes the request safe to retry: the card request
	// carries it (a key column on the created resource,
	// internal/idempotency); nil for none.
	IdempotencyKey *string
}

// CardDetails are an issued card's secrets, answered once.
type CardDetails struct {
	Number   string `json:"number"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	CVC      string `json:"cvc"`
}

// CardRequestView is a request as the agent or the human reads it.
type CardRequestView struct {
	Request       *ent.CardRequest
	AgentUsername string
	Username      string
	// Deciders and ApprovedBy name the humans whose approval it needs and
	// those of them who approved.
	Deciders, ApprovedBy []string
	// Details are the card's number, expiry and CVC, set only on the read
	// that reveals them (the first after issue).
	Details *CardDetails
}

// Status is the request's status.
func (v *CardRequestView) Status() string { return string(v.Request.Status) }

// AwaitsDecisionOf reports whether the request waits for u's approval: u
// is one of its deciders, has not approved it, and it is still pending.
func (v *CardRequestView) AwaitsDecisionOf(u uuid.UUID) bool {
	r := v.Request
	return r.Status == cardrequest.StatusPendingApproval && slices.Contains(cardDeciders(r), u) && !slices.Contains(r.ApprovedBy, u)
}

// Amount is the approved maximum.
func (v *CardRequestView) Amount() decimal.Decimal { return USDCAmount(v.Request.Amount) }

// cardEventData is the data of every card.* event: never the card's
// number or CVC.
type cardEventData struct {
	RequestID     uuid.UUID   `json:"request_id"`
	Status        string      `json:"status"`
	AgentUsername string      `json:"agent_username,omitempty"`
	AmountUSD     json.Number `json:"amount_usd"`
	MerchantName  string      `json:"merchant_name"`
	Description   string      `json:"description,omitempty"`
	CardToken     string      `json:"card_token,omitempty"`
	Last4         string      `json:"last4,omitempty"`
	ChargedUSD    json.Number `json:"charged_usd,omitempty"`
	ReturnedUSD   json.Number `json:"returned_usd,omitempty"`
	TxHash        string      `json:"tx_hash,omitempty"`
	ExpiresAt     *time.Time  `json:"expires_at,omitempty"`
	Message       string      `json:"message,omitempty"`
}

func cardEventDataOf(r *ent.CardRequest, agentUsername, message string) cardEventData {
	d := cardEventData{
		RequestID: r.ID, Status: string(r.Status), AgentUsername: agentUsername,
		AmountUSD: json.Number(USDCAmount(r.Amount).String()), MerchantName: r.MerchantName, Description: r.Description,
		Last4: r.CardLast4, Message: message,
	}
	if r.Status == cardrequest.StatusPendingApproval {
		d.ExpiresAt = &r.ExpiresAt
	} else if r.CardExpiresAt != nil {
		d.ExpiresAt = r.CardExpiresAt
	}
	if r.CardToken != nil {
		d.CardToken = *r.CardToken
	}
	if r.ChargedAmount != nil {
		d.ChargedUSD = json.Number(USDCAmount(*r.ChargedAmount).String())
	}
	return d
}

// recordCardEvents tells the agent and every decider of a move.
func (s *Service) recordCardEvents(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, r *ent.CardRequest, kind string, data cardEventData) error {
	if err := s.recordAccountEvent(ctx, tx, sqlTx, AgentParty(r.AgentID), kind, data); err != nil {
		return err
	}
	for _, id := range cardDeciders(r) {
		if err := s.recordAccountEvent(ctx, tx, sqlTx, UserParty(id), kind, data); err != nil {
			return err
		}
	}
	return nil
}

// cardDeciders are the humans whose approval the request needs: the human
// asked and each whose policy held it, as kept; the human asked alone for
// a request made before they were kept.
func cardDeciders(r *ent.CardRequest) []uuid.UUID {
	if len(r.Deciders) == 0 {
		return []uuid.UUID{r.UserID}
	}
	return r.Deciders
}
