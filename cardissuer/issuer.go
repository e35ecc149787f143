package cardissuer

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Issuer issues and closes single-use virtual cards.
type Issuer interface {
	// Name is the issuer's name in the stored requests.
	Name() string
	// Issue makes a card bound to req. It is an outside call, made
	// outside any database transaction, and idempotent by
	// req.RequestID: asked again for the same request (after a crash
	// between the call and storing its answer) the issuer answers the
	// same card, or closes the first and makes another; the service
	// stores one.
	Issue(ctx context.Context, req IssueRequest) (Card, error)
	// Close stops the card from being charged (it expired, or it was
	// charged). Closing a closed or unknown card is not an error.
	Close(ctx context.Context, reference string) error
}

// IssueRequest is a card's spending controls.
type IssueRequest struct {
	// RequestID is the service's id of the card request (the
	// idempotency key of the issue).
	RequestID string
	// MaxAmountCents is the most one charge may take, in US cents.
	MaxAmountCents int64
	// Merchant is the only merchant the card may be charged at (as the
	// merchant's name reaches the network).
	Merchant string
	// ExpiresAt is when the card stops working; the issuer may round it
	// down to a whole minute, never up.
	ExpiresAt time.Time
}

// Card is an issued card. Number, CVC and the expiry are secrets: shown
// to the agent once, stored only sealed, never logged (String redacts).
type Card struct {
	// Reference is the issuer's id of the card.
	Reference string
	Number    string
	ExpMonth  int
	ExpYear   int
	CVC       string
	// ExpiresAt is when the card stops working (at most the request's).
	ExpiresAt time.Time
}

// Last4 is the card's last four digits, the part that may be shown again.
func (c Card) Last4() string {
	if len(c.Number) < 4 {
		return c.Number
	}
	return c.Number[len(c.Number)-4:]
}

// String shows the reference and the last four digits only, so a card
// printed by mistake leaks nothing.
func (c Card) String() string {
	return fmt.Sprintf("cardissuer.Card{%s, ****%s}", c.Reference, c.Last4())
}

// GoString is String, for %#v.
func (c Card) GoString() string { return c.String() }

// Network is what a sandbox issuer also does: play the card network for
// a charge a tester makes (POST /dev/card/charge). Find checks what only
// the card proves (number, expiry date, CVC, open, not expired at now)
// and answers the card's reference or a decline reason; the amount and
// the merchant are the service's to decide, as a real issuer's
// authorization webhook leaves them to its card program.
type Network interface {
	Find(p Presented, now time.Time) (reference, decline string)
}

// Presented is a card as a merchant presents it to the network.
type Presented struct {
	Number            string
	ExpMonth, ExpYear int
	CVC               string
}

// ErrRefused: the issuer will not issue the card (its reason wrapped).
var ErrRefused = errors.New("card issuer refused")

// Luhn reports whether number (digits only) passes the Luhn check that
// card numbers carry.
func Luhn(number string) bool {
	if len(number) < 12 {
		return false
	}
	sum := 0
	double := false
	for i := len(number) - 1; i >= 0; i-- {
		c := number[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// LuhnCheckDigit is the digit that makes partial (digits only) pass Luhn
// once appended.
func LuhnCheckDigit(partial string) byte {
	for d := byte('0'); d <= '9'; d++ {
		if Luhn(partial + string(d)) {
			return d
		}
	}
	return '0' // unreachable for digits-only input
}
