// Package sandbox is a card issuer for `agentpay dev` and the tests: it
// issues single-use virtual test cards (Luhn-valid numbers on the 4000 00
// test range, which no real card uses), keeps them in memory, and plays
// the card network for POST /dev/card/charge: it finds the card a charge
// names, checks its expiry and CVC, and leaves the authorization to the
// service. Its cards live in the process: after a restart they decline as
// unknown (the service expires them and returns their money).
package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"math/big"
	"sync"
	"time"

	"agentpay/cardissuer"
)

// Name is the sandbox issuer's name.
const Name = "sandbox"

// testBIN starts every sandbox card number: a Visa test range.
const testBIN = "400000"

// Issuer is the sandbox issuer. The zero value is not usable: use New.
type Issuer struct {
	mu        sync.Mutex
	byRequest map[string]*card
	byNumber  map[string]*card
}

type card struct {
	cardissuer.Card
	max      int64
	merchant string
	closed   bool
}

var _ cardissuer.Issuer = (*Issuer)(nil)

// New returns an empty sandbox issuer.
func New() *Issuer {
	return &Issuer{byRequest: map[string]*card{}, byNumber: map[string]*card{}}
}

// Name implements cardissuer.Issuer.
func (*Issuer) Name() string { return Name }

// Issue implements cardissuer.Issuer: the same request answers the same
// card.
func (i *Issuer) Issue(_ context.Context, req cardissuer.IssueRequest) (cardissuer.Card, error) {
	if req.MaxAmountCents <= 0 || req.Merchant == "" || req.RequestID == "" {
		return cardissuer.Card{}, fmt.Errorf("%w: a card needs a request, a positive maximum and a merchant", cardissuer.ErrRefused)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.byRequest[req.RequestID]; ok {
		return c.Card, nil
	}
	expires := req.ExpiresAt.UTC().Truncate(time.Minute)
	var number string
	for {
		number = testBIN + randomDigits(9)
		number += string(cardissuer.LuhnCheckDigit(number))
		if _, taken := i.byNumber[number]; !taken {
			break
		}
	}
	c := &card{
		Card: cardissuer.Card{
			Reference: "sbxcard_" + randomDigits(16),
			Number:    number,
			ExpMonth:  int(expires.Month()),
			ExpYear:   expires.Year(),
			CVC:       randomDigits(3),
			ExpiresAt: expires,
		},
		max:      req.MaxAmountCents,
		merchant: req.Merchant,
	}
	i.byRequest[req.RequestID] = c
	i.byNumber[number] = c
	return c.Card, nil
}

// Close implements cardissuer.Issuer.
func (i *Issuer) Close(_ context.Context, reference string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, c := range i.byRequest {
		if c.Reference == reference {
			c.closed = true
		}
	}
	return nil
}

// Presented is a card as a merchant presents it.
type Presented = cardissuer.Presented

var _ cardissuer.Network = (*Issuer)(nil)

// Find implements cardissuer.Network: the card a charge presents,
// checked for what only the card itself proves (its number, expiry date,
// CVC, and that it is open and not past its expiry at now). It answers
// the issuer's reference, or a decline reason. Amount and merchant are
// the service's to decide (Service.AuthorizeCardCharge).
func (i *Issuer) Find(p Presented, now time.Time) (reference, decline string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	c, ok := i.byNumber[p.Number]
	switch {
	case !ok:
		return "", "unknown card number"
	case c.ExpMonth != p.ExpMonth || c.ExpYear != p.ExpYear:
		return "", "wrong expiry date"
	case subtle.ConstantTimeCompare([]byte(c.CVC), []byte(p.CVC)) != 1:
		return "", "wrong CVC"
	case c.closed:
		return "", "card closed"
	case !now.Before(c.ExpiresAt):
		return "", "card expired"
	}
	return c.Reference, ""
}

func randomDigits(n int) string {
	b := make([]byte, n)
	for k := range b {
		d, err := rand.Int(rand.Reader, big.NewInt(10))
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		b[k] = byte('0' + d.Int64())
	}
	return string(b)
}
