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

type errorBody struct {
	Detail string `json:"detail"`
}

// writeError maps a service error to its status code and {"detail"} body.
// Anything unexpected is logged with the request id and shown as a bare 500,
// so no internal detail (or secret) reaches the client.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, area apiArea, err error) {
	status, detail := http.StatusInternalServerError, "internal error"
	var verr *agentpay.ValidationError
	switch {
	case errors.Is(err, httpx.ErrBodyTooLarge):
		status, detail = http.StatusRequestEntityTooLarge, err.Error()
	case errors.As(err, &verr):
		status, detail = http.StatusBadRequest, verr.Error()
		if area == areaMerchant {
			status = http.StatusUnprocessableEntity
		}
	case errors.Is(err, agentpay.ErrNotFound):
		status, detail = http.StatusNotFound, err.Error()
	case errors.Is(err, agentpay.ErrIdempotencyKeyReused):
		status, detail = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, agentpay.ErrConflict):
		status, detail = http.StatusConflict, err.Error()
	case errors.Is(err, agentpay.ErrUnauthorized):
		status, detail = http.StatusUnauthorized, err.Error()
	case errors.Is(err, agentpay.ErrForbidden):
		status, detail = http.StatusForbidden, err.Error()
	case errors.Is(err, agentpay.ErrRateLimited):
		status, detail = http.StatusTooManyRequests, err.Error()
		var rl *agentpay.RateLimitError
		if errors.As(err, &rl) {
			httpx.ShowRate(w.Header(), rl.Decision, true)
		}
	case errors.Is(err, agentpay.ErrInsufficientFunds):
		status, detail = http.StatusBadRequest, err.Error()
	case errors.Is(err, agentpay.ErrUnavailable):
		status, detail = http.StatusServiceUnavailable, err.Error()
	default:
		logger.ErrorContext(r.Context(), "request failed", "request_id", middleware.GetReqID(r.Context()),
			"method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeDetail(w, status, detail)
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, errorBody{Detail: detail})
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
