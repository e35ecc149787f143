package agentpay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// PayoutProvider pays a merchant in fiat (fiat_pix settlement). The
// service converts nothing itself: the provider quotes the FX rate and
// reports what it paid, and the service records both.
type PayoutProvider interface {
	// Payout pays AmountUSD to the merchant's payout account. The provider
	// must treat IdempotencyKey as the identity of the payout: asking again
	// with the same key answers the first payout, never a second one, so a
	// settlement retried after a crash pays once.
	Payout(ctx context.Context, req PayoutRequest) (PayoutResult, error)
}

// PayoutRequest is one fiat payout.
type PayoutRequest struct {
	IdempotencyKey string
	MerchantID     uuid.UUID
	AmountUSD      decimal.Decimal
}

// PayoutResult is what the provider paid.
type PayoutResult struct {
	// Reference is the provider's id of the payout (given to the merchant
	// in settlement.completed).
	Reference string
	Currency  string
	// FXRate is units of Currency per USD.
	FXRate decimal.Decimal
	Amount decimal.Decimal
}

// ErrPayoutRefused is a payout the provider will not make as asked
// (unknown account, amount out of bounds). The settlement stays pending
// with the reason, for an operator; it is retried, never dropped.
var ErrPayoutRefused = errors.New("payout refused")

// SandboxPixProvider behaves like a PIX payout provider without moving
// money: it converts at a fixed BRL rate, rounds to centavos, answers the
// same payout for the same idempotency key (as a real provider does by its
// own records; here the reference is derived from the key, so a restart
// cannot mint a second reference either), and refuses non-positive amounts.
type SandboxPixProvider struct {
	rate decimal.Decimal

	mu      sync.Mutex
	payouts map[string]PayoutResult
}

// NewSandboxPixProvider is a sandbox paying at rate BRL per USD.
func NewSandboxPixProvider(rate decimal.Decimal) *SandboxPixProvider {
	return &SandboxPixProvider{rate: rate, payouts: map[string]PayoutResult{}}
}

// DefaultSandboxPixRate is the sandbox's BRL per USD.
var DefaultSandboxPixRate = decimal.RequireFromString("5.4321")

// Payout implements PayoutProvider.
func (p *SandboxPixProvider) Payout(_ context.Context, req PayoutRequest) (PayoutResult, error) {
	if req.IdempotencyKey == "" {
		return PayoutResult{}, errors.New("sandbox pix: idempotency key required")
	}
	if !req.AmountUSD.IsPositive() {
		return PayoutResult{}, ErrPayoutRefused
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.payouts[req.IdempotencyKey]; ok {
		return r, nil
	}
	sum := sha256.Sum256([]byte("agentpay/pix-sandbox/" + req.IdempotencyKey))
	r := PayoutResult{
		Reference: "pix_sbx_" + hex.EncodeToString(sum[:12]),
		Currency:  "BRL",
		FXRate:    p.rate,
		Amount:    req.AmountUSD.Mul(p.rate).Round(2),
	}
	p.payouts[req.IdempotencyKey] = r
	return r, nil
}

// Payouts answers how many distinct payouts the sandbox made.
func (p *SandboxPixProvider) Payouts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.payouts)
}
