package rest

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"agentpay"
	"agentpay/internal/httpx"
)

// apiArea decides which status a validation error gets: the agent API
// answers 400 (spec 7.1), the merchant and checkout API 422 (spec 7.2).
type apiArea int

const (
	areaAgent apiArea = iota
	areaMerchant
)

// writeError maps a service error to its status code and {"detail"} body.
// Anything unexpected is logged with the request id and shown as a bare 500,
// so no internal detail (or secret) reaches the client.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, area apiArea, err error) {
	status, detail := httpx.ErrorStatus(err, area == areaMerchant)
	var rl *agentpay.RateLimitError
	if errors.As(err, &rl) {
		httpx.ShowRate(w.Header(), rl.Decision, true)
	}
	if status == http.StatusInternalServerError {
		logger.ErrorContext(r.Context(), "request failed", "request_id", middleware.GetReqID(r.Context()),
			"method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeDetail(w, status, detail)
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, httpx.ErrorBody{Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"detail":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
