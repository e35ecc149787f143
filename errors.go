package agentpay

import (
	"errors"
	"fmt"

	"agentpay/internal/idempotency"
)

// Sentinel errors of the service layer. The REST and GraphQL layers map them
// to status codes in one place each; their messages are safe to show.
var (
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	ErrUnauthorized      = errors.New("invalid or missing API key")
	ErrForbidden         = errors.New("insufficient permissions")
	ErrRateLimited       = errors.New("rate limit exceeded")
	ErrInsufficientFunds = errors.New("insufficient balance")
	ErrUnavailable       = errors.New("service unavailable")
	// ErrIdempotencyKeyReused: an Idempotency-Key already used for a
	// different request (internal/idempotency, whose runner answers it).
	ErrIdempotencyKeyReused = idempotency.ErrKeyReused
)

// ValidationError is a request the service refuses before changing anything.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Invalid builds a ValidationError for one field.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// IsValidation reports whether err is (or wraps) a ValidationError.
func IsValidation(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}
