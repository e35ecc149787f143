package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// Card purchases, the agent's side (docs/identity-and-cards.md): the
// agent asks its paired human to approve, lists its requests and reads
// the card of an approved one (its details once).

type cardPurchaseBody struct {
	AmountUSD    *httpx.Amount `json:"amount_usd"`
	MerchantName *string       `json:"merchant_name"`
	Description  *string       `json:"description"`
	UserID       *string       `json:"user_id"`
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
	writeJSON(w, http.StatusCreated, httpx.CardRequestOf(v))
}

type cardRequestsResponse struct {
	Requests []httpx.CardRequest `json:"requests"`
}

// myCardRequests lists the agent's requests, newest first.
func (s *server) myCardRequests(w http.ResponseWriter, r *http.Request) {
	vs, err := s.svc.AgentCardRequests(r.Context(), agentFrom(r.Context()))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	out := cardRequestsResponse{Requests: make([]httpx.CardRequest, len(vs))}
	for i, v := range vs {
		out.Requests[i] = httpx.CardRequestOf(v)
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
	writeJSON(w, http.StatusOK, httpx.CardRequestOf(v))
}
