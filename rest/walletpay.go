package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// walletPayRequest is the body of POST
// /checkout/pay/{external_id}/authorization: an EIP-3009
// TransferWithAuthorization a browser wallet signed (eth_signTypedData_v4)
// paying the session. value, valid_after and valid_before are integers, as
// JSON numbers or decimal strings (uint256 may be past what a JSON number
// carries exactly); the service checks each field's form and size.
type walletPayRequest struct {
	Chain       *string         `json:"chain"`
	From        *string         `json:"from"`
	To          *string         `json:"to"`
	Value       json.RawMessage `json:"value"`
	ValidAfter  json.RawMessage `json:"valid_after"`
	ValidBefore json.RawMessage `json:"valid_before"`
	Nonce       *string         `json:"nonce"`
	Signature   *string         `json:"signature"`
}

// walletPayResponse is the relayed payment.
type walletPayResponse struct {
	// PaymentID is the session's payment, null until it is recorded
	// (status pending).
	PaymentID     *string      `json:"payment_id"`
	SessionID     string       `json:"session_id"`
	SessionStatus string       `json:"session_status"`
	Status        string       `json:"status"`
	AmountUSD     httpx.Amount `json:"amount_usd"`
	Chain         string       `json:"chain"`
	TxHash        string       `json:"tx_hash"`
	FromAddress   string       `json:"from_address"`
	ToAddress     string       `json:"to_address"`
	Confirmations int          `json:"confirmations"`
	// RequiredConfirmations is null when the chain does not say.
	RequiredConfirmations *uint64 `json:"required_confirmations"`
	// Replayed: this authorization had been relayed before; the answer is
	// the payment it made.
	Replayed bool `json:"replayed"`
}

// walletPay relays the payer-signed authorization (PayWithAuthorization)
// and answers the payment (200). The authorization's nonce makes it
// idempotent: posting it again answers the same payment, replayed (with
// Idempotent-Replayed: true), so no Idempotency-Key is taken.
func (s *server) walletPay(w http.ResponseWriter, r *http.Request) {
	var body walletPayRequest
	if err := decodeJSON(r, &body); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"chain", body.Chain != nil}, {"from", body.From != nil}, {"to", body.To != nil}, {"value", body.Value != nil},
		{"valid_after", body.ValidAfter != nil}, {"valid_before", body.ValidBefore != nil},
		{"nonce", body.Nonce != nil}, {"signature", body.Signature != nil},
	} {
		if !f.set {
			writeError(w, r, s.logger, areaMerchant, agentpay.Invalid(f.name, "is required"))
			return
		}
	}
	var ints [3]string
	for i, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"value", body.Value}, {"valid_after", body.ValidAfter}, {"valid_before", body.ValidBefore}} {
		v, ok := integerText(f.raw)
		if !ok {
			writeError(w, r, s.logger, areaMerchant, agentpay.Invalid(f.name, "must be a non-negative integer, as a JSON number or a decimal string"))
			return
		}
		ints[i] = v
	}
	res, err := s.svc.PayWithAuthorization(r.Context(), agentpay.AuthorizedPaymentRequest{
		ExternalID: chi.URLParam(r, "external_id"),
		Chain:      str(body.Chain),
		ClientIP:   httpx.ClientIP(r, s.proxies),
		Authorization: agentpay.TransferAuthorization{
			From: str(body.From), To: str(body.To), Value: ints[0],
			ValidAfter: ints[1], ValidBefore: ints[2],
			Nonce: str(body.Nonce), Signature: str(body.Signature),
		},
	})
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	if res.Replayed {
		w.Header().Set(httpx.IdempotentReplayedHeader, "true")
	}
	out := walletPayResponse{
		SessionID:     res.Session.ExternalID,
		SessionStatus: string(res.Session.Status),
		Status:        res.Status,
		AmountUSD:     httpx.Amount{Decimal: res.AmountUSD},
		Chain:         string(res.Chain),
		TxHash:        res.TxHash,
		FromAddress:   res.Payer,
		ToAddress:     res.PayTo,
		Confirmations: res.Confirmations,
		Replayed:      res.Replayed,
	}
	if res.Payment != nil {
		out.PaymentID = &res.Payment.ExternalID
	}
	if res.Required > 0 {
		out.RequiredConfirmations = &res.Required
	}
	writeJSON(w, http.StatusOK, out)
}

// integerText is the digits of a JSON number or string holding a
// non-negative integer (at most 78 digits, a uint256's); false for
// anything else (a fraction, an exponent, a sign, null).
func integerText(raw json.RawMessage) (string, bool) {
	s := string(bytes.TrimSpace(raw))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "" || len(s) > 78 || strings.TrimLeft(s, "0123456789") != "" {
		return "", false
	}
	return s, true
}
