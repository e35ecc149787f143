package rest

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"agentpay/internal/httpx"
)

// myApproval answers one of the agent's held operations as it is now.
func (s *server) myApproval(w http.ResponseWriter, r *http.Request) {
	v, err := s.svc.AgentSpendApproval(r.Context(), agentFrom(r.Context()), chi.URLParam(r, "approval_id"))
	if err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, httpx.ApprovalOf(v, ""))
}
