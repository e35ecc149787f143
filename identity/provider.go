package identity

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// Provider is an identity verification provider's hosted flow.
type Provider interface {
	// Name is the provider's name in the callback path
	// (/identity/callbacks/<name>) and in the stored verifications.
	Name() string
	// Start begins a verification and answers the provider's reference
	// for it and the page to send the person to. It calls the provider
	// (an outside service): it runs outside any database transaction.
	Start(ctx context.Context, req StartRequest) (Started, error)
	// Callback checks a callback's signature and freshness and reads its
	// result. A callback that does not verify is ErrSignature (wrapped,
	// with the reason); one that verifies but does not parse is
	// ErrMalformed. It does not know which events were seen before: the
	// service refuses replays by the result's EventID.
	Callback(header http.Header, body []byte, now time.Time) (Result, error)
}

// StartRequest is what the service tells the provider when a person
// starts.
type StartRequest struct {
	// VerificationID is the service's id of the verification, which the
	// provider may keep as its own reference to the service's record.
	VerificationID string
	// ReturnURL is where the provider's page sends the person back to
	// when the flow ends (the app).
	ReturnURL string
}

// Started is the provider's answer to Start.
type Started struct {
	// Reference is the provider's id of the verification: callbacks name
	// it.
	Reference string
	// URL is the provider's hosted page for the person.
	URL string
}

// State is a verification's state as the provider reports it.
type State string

// The states a provider reports. A verification starts pending; the
// provider may ask for more (requires_input, after which the person goes
// back to the provider's page), and ends verified or rejected.
const (
	StatePending       State = "pending"
	StateRequiresInput State = "requires_input"
	StateVerified      State = "verified"
	StateRejected      State = "rejected"
)

// Valid reports whether s is one of the states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateRequiresInput, StateVerified, StateRejected:
		return true
	}
	return false
}

// Final reports whether s ends the verification.
func (s State) Final() bool { return s == StateVerified || s == StateRejected }

// Result is one verified callback.
type Result struct {
	// EventID is the provider's id of this callback: one event is applied
	// once.
	EventID string
	// Reference names the verification (Started.Reference).
	Reference string
	State     State
	// OccurredAt is when the provider decided: an older result never
	// overrides a newer one that arrived first.
	OccurredAt time.Time
}

var (
	// ErrSignature: the callback's signature or timestamp does not verify.
	ErrSignature = errors.New("identity: callback signature does not verify")
	// ErrMalformed: the callback verifies but its body is not a result.
	ErrMalformed = errors.New("identity: callback is malformed")
)
