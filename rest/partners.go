package rest

import (
	"net/http"
	"time"

	"agentpay"
)

type verifyPartnerRequest struct {
	Partner     string `json:"partner"`
	Attestation string `json:"attestation"`
}

type trustScoreChange struct {
	Before int `json:"before"`
	After  int `json:"after"`
}

type verifyPartnerBody struct {
	AgentID    string           `json:"agent_id"`
	Partner    string           `json:"partner"`
	Verified   bool             `json:"verified"`
	TrustScore trustScoreChange `json:"trust_score"`
	Tier       string           `json:"tier"`
	Message    string           `json:"message"`
}

// verifyPartner links a partner identity (spec 4.2; the rules are
// agentpay.VerifyPartner's).
func (s *server) verifyPartner(w http.ResponseWriter, r *http.Request) {
	var req verifyPartnerRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	v, err := s.svc.VerifyPartner(r.Context(), agentFrom(r.Context()), agentpay.VerifyPartnerRequest{
		Partner: req.Partner, Attestation: req.Attestation,
	})
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, verifyPartnerBody{
		AgentID: v.AgentID.String(), Partner: v.Partner, Verified: true,
		TrustScore: trustScoreChange{Before: v.Before, After: v.After}, Tier: v.Tier, Message: v.Message,
	})
}

type devAttestRequest struct {
	AgentID string `json:"agent_id"`
}

type devAttestBody struct {
	Partner     string    `json:"partner"`
	AgentID     string    `json:"agent_id"`
	Attestation string    `json:"attestation"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// devPartnerAttest mints the dev partner's attestation for an agent
// (design.md section 5); 400s like the agent API it serves.
func (s *server) devPartnerAttest(w http.ResponseWriter, r *http.Request) {
	var req devAttestRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	a, err := s.svc.DevPartnerAttest(r.Context(), req.AgentID)
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, devAttestBody{
		Partner: a.Partner, AgentID: a.AgentID.String(), Attestation: a.Attestation, ExpiresAt: a.ExpiresAt.UTC(),
	})
}

// devPartnerJWKS serves the dev partner's public keys, as a partner
// publishes them.
func (s *server) devPartnerJWKS(w http.ResponseWriter, r *http.Request) {
	body, err := s.svc.DevPartnerJWKS()
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
