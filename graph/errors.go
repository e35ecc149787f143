package graph

import (
	"context"
	"errors"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"agentpay"
)

// errorCode maps a service error to the code clients switch on; the same
// errors give the same answers as the REST facade's status codes.
func errorCode(err error) string {
	switch {
	case agentpay.IsValidation(err):
		return "BAD_USER_INPUT"
	case errors.Is(err, agentpay.ErrNotFound):
		return "NOT_FOUND"
	case errors.Is(err, agentpay.ErrIdempotencyKeyReused):
		return "IDEMPOTENCY_KEY_REUSED"
	case errors.Is(err, agentpay.ErrConflict):
		return "CONFLICT"
	case errors.Is(err, agentpay.ErrUnauthorized):
		return "UNAUTHENTICATED"
	case errors.Is(err, agentpay.ErrForbidden):
		return "FORBIDDEN"
	case errors.Is(err, agentpay.ErrRateLimited):
		return "RATE_LIMITED"
	case errors.Is(err, agentpay.ErrInsufficientFunds):
		return "INSUFFICIENT_FUNDS"
	case errors.Is(err, agentpay.ErrUnavailable):
		return "UNAVAILABLE"
	}
	return ""
}

// presentError shows service errors with their code and hides anything
// unexpected behind "internal error", logging it instead.
func presentError(logger *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		var already *gqlerror.Error
		if errors.As(err, &already) && already.Err == nil {
			return gqlErr // parse and validation errors of the query itself
		}
		gqlErr.Message = renderGraphQL(gqlErr.Message)
		code := errorCode(err)
		var held *awaitingApproval
		if errors.As(err, &held) {
			code = "AWAITING_APPROVAL"
			gqlErr.Extensions = map[string]any{"approvalId": held.approval.Approval.ID.String(),
				"status": held.approval.Status(), "expiresAt": held.approval.Approval.ExpiresAt}
		}
		if code == "" && isArgumentError(ctx, err) {
			// A scalar refused an argument (a malformed cursor, Decimal or
			// Time): the client's input, like REST's 422, not our fault.
			code = "BAD_USER_INPUT"
		}
		if code == "" {
			logger.ErrorContext(ctx, "graphql resolver failed", "path", gqlErr.Path.String(), "err", err)
			gqlErr.Message = "internal error"
			code = "INTERNAL"
		}
		if gqlErr.Extensions == nil {
			gqlErr.Extensions = map[string]any{}
		}
		gqlErr.Extensions["code"] = code
		if errors.As(err, new(*replayed)) {
			gqlErr.Extensions["replayed"] = true
		}
		return gqlErr
	}
}

// isArgumentError reports whether err is the failure to read an argument of
// the field being resolved: gqlgen reports those on the argument's path,
// below the field's own, before the field has its arguments.
func isArgumentError(ctx context.Context, err error) bool {
	fc := graphql.GetFieldContext(ctx)
	var gqlErr *gqlerror.Error
	if fc == nil || fc.Args != nil || !errors.As(err, &gqlErr) {
		return false
	}
	return len(fc.Field.Arguments) > 0 && len(gqlErr.Path) > len(fc.Path())
}

// replayed marks an error that is the kept answer of an earlier request
// with the same idempotency key (extensions.replayed, as REST's
// Idempotent-Replayed header).
type replayed struct{ error }

func (e *replayed) Unwrap() error { return e.error }

// replayedError marks err replayed when it is.
func replayedError(err error, isReplayed bool) error {
	if !isReplayed {
		return err
	}
	return &replayed{err}
}

func recoverPanic(logger *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "graphql panic", "panic", p)
		return errors.New("internal error")
	}
}
