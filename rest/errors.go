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
	status, detail := ErrorStatus(err, area == areaMerchant)
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

// ErrorStatus is the HTTP status and the detail shown of a service error,
// for the REST facade and the app's pages alike. A validation error is 400,
// or 422 on the merchant and checkout API (merchantArea). Anything the
// service does not name is 500 "internal error": its text may hold what a
// client must not see.
func ErrorStatus(err error, merchantArea bool) (status int, detail string) {
	var verr *agentpay.ValidationError
	switch {
	case errors.Is(err, httpx.ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge, err.Error()
	case errors.As(err, &verr):
		if merchantArea {
			return http.StatusUnprocessableEntity, verr.Error()
		}
		return http.StatusBadRequest, verr.Error()
	case errors.Is(err, agentpay.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, agentpay.ErrIdempotencyKeyReused):
		return http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, agentpay.ErrConflict):
		return http.StatusConflict, err.Error()
	case errors.Is(err, agentpay.ErrUnauthorized):
		return http.StatusUnauthorized, err.Error()
	case errors.Is(err, agentpay.ErrForbidden):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, agentpay.ErrRateLimited):
		return http.StatusTooManyRequests, err.Error()
	case errors.Is(err, agentpay.ErrInsufficientFunds):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, agentpay.ErrUnavailable):
		return http.StatusServiceUnavailable, err.Error()
	}
	return http.StatusInternalServerError, "internal error"
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
