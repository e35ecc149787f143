package httpx

import (
	"errors"
	"net/http"

	"agentpay"
)

// ErrorBody is every facade's refusal: {"detail": "..."} (REST's body, the
// app's pages' body, the text of an MCP tool error).
type ErrorBody struct {
	Detail string `json:"detail"`
}

// ErrorStatus is the HTTP status and the detail shown of a service error,
// for REST, the app's pages and MCP alike, the actions it names written as
// REST routes (RenderREST). A validation error is 400, or
// 422 on the merchant and checkout API (merchantArea). Anything the service
// does not name is 500 "internal error": its text may hold what a client
// must not see.
func ErrorStatus(err error, merchantArea bool) (status int, detail string) {
	status, detail = errorStatus(err, merchantArea)
	return status, RenderREST(detail)
}

func errorStatus(err error, merchantArea bool) (status int, detail string) {
	var verr *agentpay.ValidationError
	switch {
	case errors.Is(err, ErrBodyTooLarge):
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
