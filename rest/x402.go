package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
	"agentpay/x402"
)

// x402 (docs/agent-commerce.md, x402): a session's 402 and its settlement
// at GET /checkout/pay/{external_id}/x402 (and at the hosted page's own
// address, {pay_url}/pay/<external_id>, for clients that ask for JSON or
// send a payment header), and the facilitator at /x402/verify,
// /x402/settle and /x402/supported.
//
// One 402 speaks both versions: v2's PaymentRequired in the
// PAYMENT-REQUIRED header, v1's challenge in the body (a v2 client reads
// the header first, a v1 client the body). The payment header a client
// sends says which version it speaks: PAYMENT-SIGNATURE (v2, answered in
// PAYMENT-RESPONSE) or X-PAYMENT (v1, answered in X-PAYMENT-RESPONSE).
// The wire format (headers, their types and encoding) is package x402's;
// what a refusal answers in PAYMENT-RESPONSE is the service's
// (X402Refusal).

func (s *server) checkoutX402(w http.ResponseWriter, r *http.Request) {
	s.serveX402(w, r, chi.URLParam(r, "external_id"))
}

// wantsX402 tells a request for a session's hosted page that an x402
// client made: it sends a payment header, or asks for JSON rather than
// HTML.
func wantsX402(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if _, mpp := mppCredential(r); mpp || r.Header.Get(x402.HeaderPaymentV1) != "" || r.Header.Get(x402.HeaderPaymentSignature) != "" {
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

// base64JSON is v's JSON in standard base64, as x402's headers carry it
// (v is one of package x402's types, which always encode).
func base64JSON(v any) string {
	h, _ := x402.EncodeHeader(v)
	return h
}

// serveX402 answers the session's requirements (402), or settles the
// payment header the request carries.
func (s *server) serveX402(w http.ResponseWriter, r *http.Request, externalID string) {
	ctx := r.Context()
	w.Header().Set("Access-Control-Expose-Headers", strings.Join([]string{x402.HeaderPaymentRequired, x402.HeaderPaymentResponse, x402.HeaderPaymentResponseV1}, ", "))
	challenge := func(message string) {
		offer, err := s.svc.X402Offers(ctx, externalID, requestURL(r))
		if err != nil {
			writeError(w, r, s.logger, areaMerchant, err)
			return
		}
		offer.V2.Error = message
		w.Header().Set(x402.HeaderPaymentRequired, base64JSON(offer.V2))
		_ = s.addMPPChallenges(w, r, externalID) // MPP's beside x402's (mpp.go)
		writeJSON(w, http.StatusPaymentRequired, x402.ChallengeV1{X402Version: x402.Version1, Error: message, Accepts: offer.V1})
	}
	if cred, ok := mppCredential(r); ok {
		s.serveMPP(w, r, externalID, cred)
		return
	}
	var (
		res            *agentpay.AuthorizedPayment
		settle         *x402.SettleResponse
		err            error
		responseHeader = x402.HeaderPaymentResponseV1
		payloadV2      *x402.PaymentPayload
	)
	switch v2, v1 := r.Header.Get(x402.HeaderPaymentSignature), r.Header.Get(x402.HeaderPaymentV1); {
	case v2 != "":
		responseHeader = x402.HeaderPaymentResponse
		if payloadV2, err = agentpay.DecodeX402PaymentV2(v2); err == nil {
			res, settle, err = s.svc.PayX402V2(ctx, externalID, httpx.ClientIP(r, s.proxies), payloadV2)
		}
	case v1 != "":
		var payload *x402.PaymentPayloadV1
		if payload, err = agentpay.DecodeX402Payment(v1); err == nil {
			res, settle, err = s.svc.PayX402(ctx, externalID, httpx.ClientIP(r, s.proxies), payload)
		}
	default:
		challenge("PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (x402 v1) header is required")
		return
	}
	if err == nil {
		w.Header().Set(responseHeader, base64JSON(settle))
		out := httpx.X402PaidOf(res)
		if !settle.Success {
			challenge("the transaction " + res.TxHash + " failed on chain; nothing was paid")
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	// A refused payment is answered as x402 answers one: 402 with the
	// reason and the requirements again. The session's own state (unknown,
	// paid, ended) keeps its status, and so does a payment-identifier
	// naming another payment (409, as the extension says).
	var verr *agentpay.ValidationError
	if errors.As(err, &verr) || errors.Is(err, agentpay.ErrInsufficientFunds) {
		if responseHeader == x402.HeaderPaymentResponse {
			w.Header().Set(x402.HeaderPaymentResponse, base64JSON(s.svc.X402Refusal(err, payloadV2)))
		}
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

// mountX402Facilitator serves /x402/verify, /x402/settle and
// /x402/supported to merchants.
func (s *server) mountX402Facilitator(r chi.Router) {
	r.Route("/x402", func(r chi.Router) {
		r.Use(s.requireMerchant)
		r.Post("/verify", s.x402Verify)
		r.Post("/settle", s.x402Settle)
		r.Get("/supported", s.x402Supported)
	})
}

// x402FacilitatorBody is a facilitator request read as far as its
// version, which says how the rest reads (strictly, as any body).
type x402FacilitatorBody struct {
	X402Version         int             `json:"x402Version"`
	PaymentPayload      json.RawMessage `json:"paymentPayload"`
	PaymentRequirements json.RawMessage `json:"paymentRequirements"`
}

// decodeFacilitator reads a facilitator request as v1's or v2's shape,
// whichever its x402Version says (v1 when it is not 2, whose checks then
// name the version).
func decodeFacilitator(r *http.Request) (v1 *x402.FacilitatorRequestV1, v2 *x402.FacilitatorRequest, err error) {
	var body x402FacilitatorBody
	if err := decodeJSON(r, &body); err != nil {
		return nil, nil, err
	}
	strict := func(field string, raw json.RawMessage, dst any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return agentpay.Invalid(field, "%s", err.Error())
		}
		return nil
	}
	if body.X402Version == x402.Version2 {
		v2 = &x402.FacilitatorRequest{X402Version: body.X402Version}
		if err := strict("paymentPayload", body.PaymentPayload, &v2.PaymentPayload); err != nil {
			return nil, nil, err
		}
		if err := strict("paymentRequirements", body.PaymentRequirements, &v2.PaymentRequirements); err != nil {
			return nil, nil, err
		}
		return nil, v2, nil
	}
	v1 = &x402.FacilitatorRequestV1{X402Version: body.X402Version}
	if err := strict("paymentPayload", body.PaymentPayload, &v1.PaymentPayload); err != nil {
		return nil, nil, err
	}
	if err := strict("paymentRequirements", body.PaymentRequirements, &v1.PaymentRequirements); err != nil {
		return nil, nil, err
	}
	return v1, nil, nil
}

func (s *server) x402Verify(w http.ResponseWriter, r *http.Request) {
	v1, v2, err := decodeFacilitator(r)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	var out *x402.VerifyResponse
	if v2 != nil {
		out, err = s.svc.X402VerifyV2(r.Context(), merchantFrom(r.Context()), v2)
	} else {
		out, err = s.svc.X402Verify(r.Context(), merchantFrom(r.Context()), v1)
	}
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) x402Settle(w http.ResponseWriter, r *http.Request) {
	v1, v2, err := decodeFacilitator(r)
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	var out *x402.SettleResponse
	if v2 != nil {
		out, err = s.svc.X402SettleV2(r.Context(), merchantFrom(r.Context()), v2)
	} else {
		out, err = s.svc.X402Settle(r.Context(), merchantFrom(r.Context()), v1)
	}
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// x402Supported answers what the facilitator settles for the key's mode.
func (s *server) x402Supported(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.svc.X402SupportedFor(merchantFrom(r.Context()).Mode))
}
