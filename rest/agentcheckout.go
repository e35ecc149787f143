package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// agentPayRequest is the optional body of POST
// /checkout/pay/{external_id}/agent-pay.
type agentPayRequest struct {
	Chain *string `json:"chain"`
}

// agentPay pays the session's exact amount from the authenticated agent's
// wallet and answers the payment with its status (200): detected once the
// transfer is included (confirming, confirmed as the chain confirms), or
// pending when inclusion outlasts the wait. With an Idempotency-Key a
// retry is answered from the first request's payment as it is now, marked
// Idempotent-Replayed: true.
func (s *server) agentPay(w http.ResponseWriter, r *http.Request) {
	var body agentPayRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &body); err != nil {
			writeError(w, r, s.logger, areaAgent, err)
			return
		}
	}
	req := agentpay.PayCheckoutRequest{ExternalID: chi.URLParam(r, "external_id")}
	if body.Chain != nil {
		req.Chain = *body.Chain
	}
	var err error
	if req.IdempotencyKey, err = idempotencyKey(r); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	res, replayed, err := s.svc.PayCheckout(r.Context(), agentFrom(r.Context()), req)
	if replayed {
		w.Header().Set(httpx.IdempotentReplayedHeader, "true")
	}
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	if res.Approval != nil {
		// Held by a paired human's spending policy: accepted, not done.
		writeJSON(w, http.StatusAccepted, httpx.ApprovalOf(res.Approval, res.Message))
		return
	}
	writeJSON(w, http.StatusOK, httpx.CheckoutPaymentOf(res))
}
