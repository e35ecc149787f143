package rest

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// Card purchases, the agent's side (docs/identity-and-cards.md): the
// agent asks its paired human to approve, lists its requests and reads
// the card of an approved one (its details once).

type cardPurchaseBody struct {
	AmountUSD    *Amount `json:"amount_usd"`
	MerchantName *string `json:"merchant_name"`
	Description  *string `json:"description"`
	UserID       *string `json:"user_id"`
}

// cardDetails are the card's secrets, in the one answer that shows them.
type cardDetails struct {
	Number   string `json:"number"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	CVC      string `json:"cvc"`
}

// cardBody is the card of an approved request.
type cardBody struct {
	Token     string       `json:"card_token"`
	Last4     string       `json:"last4"`
	MaxUSD    Amount       `json:"max_amount_usd"`
	Merchant  string       `json:"merchant_name"`
	ExpiresAt *time.Time   `json:"expires_at"`
	Details   *cardDetails `json:"details,omitempty"`
	// Revealed: the details were shown (in this answer or an earlier one).
	Revealed bool `json:"revealed"`
}

type cardRequestResponse struct {
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
	Card         *cardBody  `json:"card"`
	ChargedUSD   *Amount    `json:"charged_usd"`
	ReturnedUSD  *Amount    `json:"returned_usd"`
	ReturnTxHash string     `json:"return_tx_hash,omitempty"`
	Error        string     `json:"error,omitempty"`
}

func cardRequestOf(v *agentpay.CardRequestView) cardRequestResponse {
	r := v.Request
	out := cardRequestResponse{
		RequestID: r.ID.String(), Status: v.Status(), AmountUSD: Amount{v.Amount()},
		MerchantName: r.MerchantName, Description: r.Description, UserID: r.UserID.String(), Username: v.Username,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, DecidedAt: r.DecidedAt, Error: r.Error,
	}
	if r.CardToken != nil {
		out.Card = &cardBody{
			Token: *r.CardToken, Last4: r.CardLast4, MaxUSD: Amount{v.Amount()}, Merchant: r.MerchantName,
			ExpiresAt: r.CardExpiresAt, Revealed: r.CardRevealedAt != nil,
		}
		if d := v.Details; d != nil {
			out.Card.Details = &cardDetails{Number: d.Number, ExpMonth: d.ExpMonth, ExpYear: d.ExpYear, CVC: d.CVC}
		}
	}
	if r.ChargedAmount != nil {
		out.ChargedUSD = &Amount{agentpay.USDCAmount(*r.ChargedAmount)}
	}
	if r.RefundedAt != nil {
		out.ReturnedUSD = &Amount{agentpay.USDCAmount(r.RefundAmount)}
		out.ReturnTxHash = r.RefundTxHash
	}
	return out
}

// requestCardPurchase answers 201 with the pending request; with an
// Idempotency-Key a retry answers the first request again, marked
// Idempotent-Replayed: true.
func (s *server) requestCardPurchase(w http.ResponseWriter, r *http.Request) {
	var body cardPurchaseBody
	if err := decodeJSON(r, &body); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	if body.AmountUSD == nil {
		writeError(w, r, s.logger, areaAgent, agentpay.Invalid("amount_usd", "is required"))
		return
	}
	req := agentpay.CardPurchaseRequest{AmountUSD: body.AmountUSD.Decimal}
	if body.MerchantName != nil {
		req.MerchantName = *body.MerchantName
	}
	if body.Description != nil {
		req.Description = *body.Description
	}
	if body.UserID != nil {
		req.UserID = *body.UserID
	}
	var err error
	if req.IdempotencyKey, err = idempotencyKey(r); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	v, replayed, err := s.svc.RequestCardPurchase(r.Context(), agentFrom(r.Context()), req)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	if replayed {
		w.Header().Set(httpx.IdempotentReplayedHeader, "true")
	}
	writeJSON(w, http.StatusCreated, cardRequestOf(v))
}

type cardRequestsResponse struct {
	Requests []cardRequestResponse `json:"requests"`
}

// myCardRequests lists the agent's requests, newest first.
func (s *server) myCardRequests(w http.ResponseWriter, r *http.Request) {
	vs, err := s.svc.AgentCardRequests(r.Context(), agentFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	out := cardRequestsResponse{Requests: make([]cardRequestResponse, len(vs))}
	for i, v := range vs {
		out.Requests[i] = cardRequestOf(v)
	}
	writeJSON(w, http.StatusOK, out)
}

// myCardRequest is one request; the first read after the card is issued
// carries its details, and is not to be cached.
func (s *server) myCardRequest(w http.ResponseWriter, r *http.Request) {
	v, err := s.svc.AgentCardRequest(r.Context(), agentFrom(r.Context()), chi.URLParam(r, "request_id"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, cardRequestOf(v))
}
