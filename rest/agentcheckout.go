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

// agentPayResponse is an agent's checkout payment (docs/agent-commerce.md).
type agentPayResponse struct {
	// TransactionID is the agent's transfer (as in its transfers list).
	TransactionID string `json:"transaction_id"`
	// PaymentID is the session's payment, null until it is recorded.
	PaymentID     *string `json:"payment_id"`
	SessionID     string  `json:"session_id"`
	SessionStatus string  `json:"session_status"`
	Status        string  `json:"status"`
	AmountUSD     Amount  `json:"amount_usd"`
	Chain         string  `json:"chain"`
	TxHash        *string `json:"tx_hash"`
	FromAddress   string  `json:"from_address"`
	ToAddress     string  `json:"to_address"`
	Confirmations int     `json:"confirmations"`
	// RequiredConfirmations is null when the chain does not say.
	RequiredConfirmations *uint64 `json:"required_confirmations"`
	Message               string  `json:"message"`
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
		writeJSON(w, http.StatusAccepted, approvalResponseOf(res.Approval, res.Message))
		return
	}
	writeJSON(w, http.StatusOK, agentPayResponseOf(res))
}

func agentPayResponseOf(res *agentpay.CheckoutPayment) agentPayResponse {
	out := agentPayResponse{
		TransactionID: res.Transfer.ID.String(),
		SessionID:     res.Session.ExternalID,
		SessionStatus: string(res.Session.Status),
		Status:        res.Status,
		AmountUSD:     Amount{res.AmountUSD},
		Chain:         string(res.Chain),
		FromAddress:   res.Transfer.FromAddress,
		ToAddress:     res.Transfer.ToAddress,
		Confirmations: res.Confirmations,
		Message:       res.Message,
	}
	if res.Payment != nil {
		out.PaymentID = &res.Payment.ExternalID
	}
	if res.Transfer.TxHash != "" {
		out.TxHash = &res.Transfer.TxHash
	}
	if res.Required > 0 {
		out.RequiredConfirmations = &res.Required
	}
	return out
}
