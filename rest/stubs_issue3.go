package rest

// Temporary: each handler here is deleted by the engineer who implements it
// in its own file. This file must be gone before issue 3 is resolved.

import (
	"net/http"

	"agentpay"
)

func notYet(w http.ResponseWriter, r *http.Request) {
	writeDetail(w, http.StatusNotImplemented, "not implemented yet")
}

// agents.go
func (s *server) quickRegister(w http.ResponseWriter, r *http.Request)    { notYet(w, r) }
func (s *server) leaderboard(w http.ResponseWriter, r *http.Request)      { notYet(w, r) }
func (s *server) stats(w http.ResponseWriter, r *http.Request)            { notYet(w, r) }
func (s *server) treasury(w http.ResponseWriter, r *http.Request)         { notYet(w, r) }
func (s *server) checkUsername(w http.ResponseWriter, r *http.Request)    { notYet(w, r) }
func (s *server) agentByUsername(w http.ResponseWriter, r *http.Request)  { notYet(w, r) }
func (s *server) agentByID(w http.ResponseWriter, r *http.Request)        { notYet(w, r) }
func (s *server) myProfile(w http.ResponseWriter, r *http.Request)        { notYet(w, r) }
func (s *server) myLimits(w http.ResponseWriter, r *http.Request)         { notYet(w, r) }
func (s *server) myWallets(w http.ResponseWriter, r *http.Request)        { notYet(w, r) }
func (s *server) regenerateAPIKey(w http.ResponseWriter, r *http.Request) { notYet(w, r) }

// transfers.go
func (s *server) myBalance(w http.ResponseWriter, r *http.Request) { notYet(w, r) }
func (s *server) send(w http.ResponseWriter, r *http.Request)      { notYet(w, r) }

// ratelimit.go
func (s *server) limitIP(kind agentpay.RateKind) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return next }
}
func writeRateHeaders(w http.ResponseWriter, dec agentpay.RateDecision) {}

// eip712.go / openapi.go
func (s *server) register(w http.ResponseWriter, r *http.Request)         { notYet(w, r) }
func (s *server) signatureMessage(w http.ResponseWriter, r *http.Request) { notYet(w, r) }
func (s *server) verifyWallet(w http.ResponseWriter, r *http.Request)     { notYet(w, r) }
func (s *server) openAPI(w http.ResponseWriter, r *http.Request)          { notYet(w, r) }
