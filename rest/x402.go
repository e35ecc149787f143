package rest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// x402 (docs/agent-commerce.md, x402): a session's 402 and its settlement
// at GET /checkout/pay/{external_id}/x402 (and at the hosted page's own
// address, {pay_url}/pay/<external_id>, for clients that ask for JSON or
// send X-PAYMENT), and the facilitator at /x402/verify and /x402/settle.

const (
	x402PaymentHeader  = "X-PAYMENT"
	x402ResponseHeader = "X-PAYMENT-RESPONSE"
)

// x402Challenge is a 402's body.
type x402Challenge struct {
	X402Version int                        `json:"x402Version"`
	Error       string                     `json:"error"`
	Accepts     []agentpay.X402Requirement `json:"accepts"`
}

// x402PaidResponse is the body of a paid session's answer.
type x402PaidResponse struct {
	ExternalID    string       `json:"external_id"`
	SessionStatus string       `json:"session_status"`
	Status        string       `json:"status"`
	PaymentID     *string      `json:"payment_id"`
	Chain         string       `json:"chain"`
	TxHash        string       `json:"tx_hash"`
	Payer         string       `json:"payer"`
	AmountUSD     httpx.Amount `json:"amount_usd"`
	Replayed      bool         `json:"replayed"`
}

func (s *server) checkoutX402(w http.ResponseWriter, r *http.Request) {
	s.serveX402(w, r, chi.URLParam(r, "external_id"))
}

// wantsX402 tells a request for a session's hosted page that an x402
// client made: it sends X-PAYMENT, or asks for JSON rather than HTML.
func wantsX402(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if r.Header.Get(x402PaymentHeader) != "" {
		return true
	}
	accept := strings.ToLower(r.Header.Get("Accept"))
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// x402Pages serves x402 clients at {pay_url}/pay/<external_id> and
// everyone else the hosted page.
func (s *server) x402Pages(pages http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/pay/")
		if ok && id != "" && !strings.Contains(id, "/") && wantsX402(r) {
			s.serveX402(w, r, id)
			return
		}
		pages.ServeHTTP(w, r)
	})
}

// serveX402 answers the session's requirements (402), or settles the
// X-PAYMENT the request carries.
func (s *server) serveX402(w http.ResponseWriter, r *http.Request, externalID string) {
	ctx := r.Context()
	w.Header().Set("Access-Control-Expose-Headers", x402ResponseHeader)
	challenge := func(message string) {
		accepts, err := s.svc.X402Requirements(ctx, externalID, requestURL(r))
		if err != nil {
			writeError(w, r, s.logger, areaMerchant, err)
			return
		}
		writeJSON(w, http.StatusPaymentRequired, x402Challenge{X402Version: agentpay.X402Version, Error: message, Accepts: accepts})
	}
	header := r.Header.Get(x402PaymentHeader)
	if header == "" {
		challenge("X-PAYMENT header is required")
		return
	}
	payload, err := agentpay.DecodeX402Payment(header)
	if err == nil {
		var (
			res    *agentpay.AuthorizedPayment
			settle *agentpay.X402SettleResponse
		)
		if res, settle, err = s.svc.PayX402(ctx, externalID, httpx.ClientIP(r, s.proxies), payload); err == nil {
			body, _ := json.Marshal(settle)
			w.Header().Set(x402ResponseHeader, base64.StdEncoding.EncodeToString(body))
			out := x402PaidResponse{
				ExternalID: res.Session.ExternalID, SessionStatus: string(res.Session.Status), Status: res.Status,
				Chain: string(res.Chain), TxHash: res.TxHash, Payer: res.Payer, AmountUSD: httpx.Amount{Decimal: res.AmountUSD}, Replayed: res.Replayed,
			}
			if res.Payment != nil {
				out.PaymentID = &res.Payment.ExternalID
			}
			if !settle.Success {
				challenge("the relayed transaction " + res.TxHash + " failed on chain; the authorization was not used")
				return
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
	// A refused payment is answered as x402 answers one: 402 with the
	// reason and the requirements again. The session's own state (unknown,
	// paid, ended) keeps its status.
	var verr *agentpay.ValidationError
	if errors.As(err, &verr) || errors.Is(err, agentpay.ErrInsufficientFunds) {
		challenge(err.Error())
		return
	}
	writeError(w, r, s.logger, areaMerchant, err)
}

// requestURL is the absolute URL the client asked for.
func requestURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.Path
}

// mountX402Facilitator serves /x402/verify and /x402/settle to merchants.
func (s *server) mountX402Facilitator(r chi.Router) {
	r.Route("/x402", func(r chi.Router) {
		r.Use(s.requireMerchant)
		r.Post("/verify", s.x402Verify)
		r.Post("/settle", s.x402Settle)
	})
}

func (s *server) x402Verify(w http.ResponseWriter, r *http.Request) {
	var req agentpay.X402FacilitatorRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	out, err := s.svc.X402Verify(r.Context(), merchantFrom(r.Context()), &req)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) x402Settle(w http.ResponseWriter, r *http.Request) {
	var req agentpay.X402FacilitatorRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	out, err := s.svc.X402Settle(r.Context(), merchantFrom(r.Context()), &req)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
