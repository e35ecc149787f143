package rest

import (
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// identityCallback: POST /identity/callbacks/{provider}, an identity
// provider's signed result (agentpay.Service.HandleIdentityCallback). It
// answers 200 {"received": true}, or the refusal's status and detail;
// providers retry what is not 2xx.
func (s *server) identityCallback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, agentpay.MaxCallbackBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeDetail(w, http.StatusRequestEntityTooLarge, httpx.ErrBodyTooLarge.Error())
			return
		}
		writeDetail(w, http.StatusBadRequest, "body: could not be read")
		return
	}
	if err := s.svc.HandleIdentityCallback(r.Context(), chi.URLParam(r, "provider"), r.Header, body); err != nil {
		writeError(w, r, s.logger, areaAgent, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"received": true})
}
