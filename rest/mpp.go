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

// MPP (docs/agent-commerce.md, MPP; the rules in ../mpp.go): the
// "Payment" HTTP authentication scheme at a session's 402 addresses.
// GET /checkout/pay/{external_id}/mpp speaks MPP alone (its 402 body the
// draft's problem detail); the x402 address and the hosted page's address
// add the session's Payment challenges beside x402's 402 and take an
// Authorization: Payment credential, so a client of either dialect pays
// at either address.

const (
	mppReceiptHeader = "Payment-Receipt"
	wwwAuthenticate  = "WWW-Authenticate"
)

// mppProblem is an RFC 9457 problem detail as the draft types them.
type mppProblem struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Detail      string `json:"detail"`
	ChallengeID string `json:"challengeId,omitempty"`
}

var mppTitles = map[string]string{
	agentpay.MPPPaymentRequired:     "Payment Required",
	agentpay.MPPPaymentExpired:      "Payment Expired",
	agentpay.MPPVerificationFailed:  "Verification Failed",
	agentpay.MPPMalformedCredential: "Malformed Credential",
	agentpay.MPPInvalidChallenge:    "Invalid Challenge",
}

// mppCredential is the request's Authorization: Payment value, if any.
func mppCredential(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, _, _ := strings.Cut(strings.TrimSpace(h), " ")
	return h, strings.EqualFold(scheme, "Payment")
}

// addMPPChallenges adds the session's Payment challenges to a 402 being
// answered (beside x402's); nothing when the session has none to offer,
// whose error the caller answers (x402's answer has its own).
func (s *server) addMPPChallenges(w http.ResponseWriter, r *http.Request, externalID string) error {
	challenges, err := s.svc.MPPChallenges(r.Context(), externalID, r.Host)
	if err != nil {
		return err
	}
	for _, c := range challenges {
		w.Header().Add(wwwAuthenticate, c.Header())
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Add("Access-Control-Expose-Headers", wwwAuthenticate+", "+mppReceiptHeader)
	return nil
}

func (s *server) checkoutMPP(w http.ResponseWriter, r *http.Request) {
	externalID := chi.URLParam(r, "external_id")
	if header, ok := mppCredential(r); ok {
		s.serveMPP(w, r, externalID, header)
		return
	}
	s.mppChallenge(w, r, externalID, &agentpay.MPPError{Code: agentpay.MPPPaymentRequired,
		Detail: "payment required: answer one of the Payment challenges in WWW-Authenticate with an Authorization: Payment credential"})
}

// mppChallenge answers 402 with fresh challenges and the refusal's problem;
// when the session offers none (unknown, paid, ended), that is the answer.
func (s *server) mppChallenge(w http.ResponseWriter, r *http.Request, externalID string, refusal *agentpay.MPPError) {
	if err := s.addMPPChallenges(w, r, externalID); err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	body, _ := json.Marshal(mppProblem{Type: agentpay.MPPProblemBase + refusal.Code, Title: mppTitles[refusal.Code],
		Status: http.StatusPaymentRequired, Detail: refusal.Detail, ChallengeID: refusal.ChallengeID})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusPaymentRequired)
	_, _ = w.Write(append(body, '\n'))
}

// serveMPP settles a credential: 200 with Payment-Receipt once the
// transfer is included, 202 while it is not (no receipt before
// inclusion; the same credential again answers it), 402 with a problem
// and fresh challenges when the credential is refused. Under an
// Idempotency-Key a retry with a new credential is answered the first
// payment (marked replayed); the key naming another payment is 422.
func (s *server) serveMPP(w http.ResponseWriter, r *http.Request, externalID, header string) {
	w.Header().Add("Access-Control-Expose-Headers", wwwAuthenticate+", "+mppReceiptHeader)
	cred, err := agentpay.DecodeMPPCredential(header)
	var (
		res     *agentpay.AuthorizedPayment
		receipt *agentpay.MPPReceipt
		key     *string
	)
	if err == nil {
		key, err = idempotencyKey(r)
	}
	if err == nil {
		res, receipt, err = s.svc.PayMPP(r.Context(), externalID, r.Host, httpx.ClientIP(r, s.proxies), key, cred)
	}
	var refusal *agentpay.MPPError
	if errors.As(err, &refusal) {
		s.mppChallenge(w, r, externalID, refusal)
		return
	}
	if err != nil {
		writeError(w, r, s.logger, areaMerchant, err)
		return
	}
	// The same body as x402's paid answer.
	out := httpx.X402PaidOf(res)
	w.Header().Set("Cache-Control", "private")
	if receipt == nil {
		writeJSON(w, http.StatusAccepted, out)
		return
	}
	raw, _ := json.Marshal(receipt)
	w.Header().Set(mppReceiptHeader, base64.RawURLEncoding.EncodeToString(raw))
	writeJSON(w, http.StatusOK, out)
}
