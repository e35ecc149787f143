package rest

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

// Refunds of a session's payments (docs/money.md#refunds):
// POST /checkout/sessions/{external_id}/refunds records one (201; with an
// Idempotency-Key a retry answers the same refund, 200 with
// Idempotent-Replayed: true), GET lists them.

type createRefundRequest struct {
	PaymentID string        `json:"payment_id"`
	AmountUSD *httpx.Amount `json:"amount_usd"`
	Address   string        `json:"address"`
	Reason    string        `json:"reason"`
}

// refundBody is a refund as the merchant API shows it.
type refundBody struct {
	RefundID          string       `json:"refund_id"`
	SessionExternalID string       `json:"session_external_id"`
	PaymentID         string       `json:"payment_id"`
	Livemode          bool         `json:"livemode"`
	Status            string       `json:"status"`
	AmountUSD         httpx.Amount `json:"amount_usd"`
	Chain             string       `json:"chain"`
	Token             string       `json:"token"`
	ToAddress         string       `json:"to_address"`
	Reason            *string      `json:"reason"`
	TxHash            *string      `json:"tx_hash"`
	Error             *string      `json:"error"`
	CreatedAt         time.Time    `json:"created_at"`
	CompletedAt       *time.Time   `json:"completed_at"`
	AfterPayout       bool         `json:"after_payout"`
	ReservedUSD       httpx.Amount `json:"reserved_usd"`
	Destination       string       `json:"destination"`
	RequestedWith     *string      `json:"requested_with"`
}

func newRefundBody(sessionExternalID string, r *ent.Refund, p *ent.Payment) refundBody {
	return refundBody{
		RefundID:          r.ExternalID,
		SessionExternalID: sessionExternalID,
		PaymentID:         p.ExternalID,
		Livemode:          r.Livemode,
		Status:            string(r.Status),
		AmountUSD:         httpx.Amount{Decimal: r.AmountUsd},
		Chain:             r.Chain,
		Token:             r.Token,
		ToAddress:         r.ToAddress,
		Reason:            nullable(r.Reason),
		TxHash:            nullable(r.TxHash),
		Error:             nullable(r.Error),
		CreatedAt:         r.CreatedAt.UTC(),
		CompletedAt:       utcPtr(r.CompletedAt),
		AfterPayout:       r.AfterPayout,
		ReservedUSD:       httpx.Amount{Decimal: agentpay.USDCAmount(r.ReservedToken)},
		Destination:       string(r.Destination),
		RequestedWith:     (*string)(r.RequestedWith),
	}
}

func (s *server) createRefund(w http.ResponseWriter, r *http.Request) {
	var req createRefundRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	in := agentpay.RefundInput{PaymentID: req.PaymentID, Address: req.Address, Reason: req.Reason}
	if key != nil {
		in.IdempotencyKey = *key
	}
	if req.AmountUSD != nil {
		d := req.AmountUSD.Decimal
		in.AmountUSD = &d
	}
	externalID := chi.URLParam(r, "external_id")
	out, err := s.svc.CreateRefund(r.Context(), merchantFrom(r.Context()), externalID, in)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	status := http.StatusCreated
	if out.Replayed {
		w.Header().Set(httpx.IdempotentReplayedHeader, "true")
		status = http.StatusOK
	}
	writeJSON(w, status, newRefundBody(externalID, out.Refund, out.Payment))
}

type refundListBody struct {
	Data []refundBody `json:"data"`
}

func (s *server) listRefunds(w http.ResponseWriter, r *http.Request) {
	externalID := chi.URLParam(r, "external_id")
	rs, err := s.svc.ListRefunds(r.Context(), merchantFrom(r.Context()), externalID)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	out := refundListBody{Data: make([]refundBody, len(rs))}
	for i, rf := range rs {
		out.Data[i] = newRefundBody(externalID, rf, rf.Edges.Payment)
	}
	writeJSON(w, http.StatusOK, out)
}
