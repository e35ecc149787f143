// Package sandbox is a PIX payout provider that behaves like a real one
// without moving money: it converts at a fixed BRL rate, rounds to
// centavos, answers the same payout for the same idempotency key (as a
// real provider does by its own records; here the reference is derived
// from the key, so a restart cannot mint a second reference either), and
// refuses non-positive amounts. `agentpay dev` and the tests run it.
package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/shopspring/decimal"

	"agentpay/payout"
)

// DefaultRate is the sandbox's BRL per USD.
var DefaultRate = decimal.RequireFromString("5.4321")

// Pix is the sandbox provider.
type Pix struct {
	rate decimal.Decimal

	mu      sync.Mutex
	payouts map[string]payout.Result
}

// New is a sandbox paying at rate BRL per USD.
func New(rate decimal.Decimal) *Pix {
	return &Pix{rate: rate, payouts: map[string]payout.Result{}}
}

// Payout implements payout.Provider.
func (p *Pix) Payout(_ context.Context, req payout.Request) (payout.Result, error) {
	if req.IdempotencyKey == "" {
		return payout.Result{}, errors.New("sandbox pix: idempotency key required")
	}
	if !req.AmountUSD.IsPositive() {
		return payout.Result{}, payout.ErrRefused
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.payouts[req.IdempotencyKey]; ok {
		return r, nil
	}
	sum := sha256.Sum256([]byte("agentpay/pix-sandbox/" + req.IdempotencyKey))
	r := payout.Result{
		Reference: "pix_sbx_" + hex.EncodeToString(sum[:12]),
		Currency:  "BRL",
		FXRate:    p.rate,
		Amount:    req.AmountUSD.Mul(p.rate).Round(2),
	}
	p.payouts[req.IdempotencyKey] = r
	return r, nil
}

// Payouts answers how many distinct payouts the sandbox made.
func (p *Pix) Payouts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.payouts)
}
