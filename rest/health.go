package rest

import (
	"net/http"
)

type healthResponse struct {
	Status string `json:"status"`
}

// healthz answers while the process serves requests.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
}

// readyz answers 200 only when the database and every chain answer (the
// chains as this process's head cache has them: a probe never calls a
// node itself).
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Ready(r.Context()); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ready"})
}
