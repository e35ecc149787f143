package agentpay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/internal/idempotency"
)

// Idempotency keys on money-moving requests (design.md 6): the rules, the
// two designs and which a new operation picks are in internal/idempotency's
// package doc. This file configures its runner for the service (the
// clock, the error kinds kept and replayed) and holds what every keyed
// operation shares (the key's syntax, the scopes); each operation's own
// caller is next to the operation (Send in transfer_send.go, Withdraw,
// PayCheckout).

// IdempotencyKeyTTL is how long a key is kept and its answer replayed.
const IdempotencyKeyTTL = 24 * time.Hour

// IdempotencyLease is how long a claim stays its request's while the
// request runs: longer than the send's wait for inclusion
// (DefaultSendWait) with room for the work around it. A request still
// running after it loses its claim to a retry.
const IdempotencyLease = 2 * DefaultSendWait

// newIdempotencyRunner is the service's runner of keyed operations.
func (s *Service) newIdempotencyRunner() *idempotency.Runner {
	return &idempotency.Runner{
		DB: s.cfg.DB, Now: s.now, TTL: IdempotencyKeyTTL, Lease: IdempotencyLease,
		KeepError: func(err error) (any, bool) { return refusalOf(err) },
		ReplayError: func(kept json.RawMessage) error {
			var r refusalAnswer
			if err := json.Unmarshal(kept, &r); err != nil {
				return fmt.Errorf("idempotency key: unreadable refusal: %w", err)
			}
			return r.err()
		},
		Conflict: ErrConflict,
		Logger:   s.logger,
	}
}

// ParseIdempotencyKey reads an Idempotency-Key value: 1 to 255 printable
// ASCII characters (space to tilde), either bare or as the IETF draft's
// structured-field string (in double quotes, with \" and \\ escapes), so
// `abc` and `"abc"` are the same key. Anything else is a ValidationError.
func ParseIdempotencyKey(raw string) (string, error) {
	key := raw
	if strings.HasPrefix(raw, `"`) {
		var ok bool
		if key, ok = unquoteSFString(raw); !ok {
			return "", Invalid("Idempotency-Key", "must be a string in double quotes with only \\\" and \\\\ escaped, or bare printable ASCII")
		}
	}
	if key == "" || len(key) > IdempotencyKeyMaxLen {
		return "", Invalid("Idempotency-Key", "must be 1 to %d characters long", IdempotencyKeyMaxLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", Invalid("Idempotency-Key", "must contain printable ASCII characters only")
		}
	}
	return key, nil
}

// unquoteSFString decodes an RFC 8941 string: "..." where a backslash
// escapes only a double quote or a backslash.
func unquoteSFString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		switch c := s[i]; c {
		case '\\':
			i++
			if i == len(s)-1 || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		case '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func agentIdempotencyScope(id uuid.UUID) string { return "agent:" + id.String() }
func userIdempotencyScope(id uuid.UUID) string  { return "user:" + id.String() }

// parsedKey is a request's key as the runner takes it: parsed, "" for none.
func parsedKey(key *string) (string, error) {
	if key == nil {
		return "", nil
	}
	return ParseIdempotencyKey(*key)
}

// refusalAnswer is an error answer as kept: which kind (keeping the
// status it maps to), and the text shown.
type refusalAnswer struct {
	Kind    string `json:"kind"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// refusalKinds name the kept errors: whether each is final (kept even when
// nothing was recorded), and the sentinel it is replayed as. Anything else
// is "internal", kept only once something was recorded, and replayed as an
// error that shows as "internal error".
var refusalKinds = []struct {
	kind  string
	err   error
	final bool
}{
	{"not_found", ErrNotFound, true},
	{"forbidden", ErrForbidden, true},
	{"insufficient_funds", ErrInsufficientFunds, true},
	{"conflict", ErrConflict, true},
	{"unavailable", ErrUnavailable, false},
}

// refusalOf is err as kept, and whether it is final.
func refusalOf(err error) (*refusalAnswer, bool) {
	var v *ValidationError
	if errors.As(err, &v) {
		return &refusalAnswer{Kind: "validation", Field: v.Field, Message: v.Message}, true
	}
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			return &refusalAnswer{Kind: k.kind, Message: err.Error()}, k.final
		}
	}
	// Never the internal detail: it stays in the log.
	return &refusalAnswer{Kind: "internal", Message: "internal error"}, false
}

// err is the kept error again, mapping to the same status and text.
func (r *refusalAnswer) err() error {
	if r.Kind == "validation" {
		return &ValidationError{Field: r.Field, Message: r.Message}
	}
	for _, k := range refusalKinds {
		if k.kind == r.Kind {
			return &replayedError{kind: k.err, msg: r.Message}
		}
	}
	return errors.New(r.Message)
}

// replayedError is a kept error: its text as first shown, its kind for
// errors.Is.
type replayedError struct {
	kind error
	msg  string
}

func (e *replayedError) Error() string { return e.msg }
func (e *replayedError) Unwrap() error { return e.kind }

// PruneIdempotencyKeys deletes the keys past their IdempotencyKeyTTL (a
// claim finds and replaces an expired key itself; this keeps the table to
// a day's requests). It returns how many it deleted.
func (s *Service) PruneIdempotencyKeys(ctx context.Context) (int, error) {
	return s.idem.Prune(ctx)
}
