package payout

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// Provider pays a merchant in fiat.
type Provider interface {
	// Payout pays AmountUSD to the merchant's payout account, once per
	// IdempotencyKey.
	Payout(ctx context.Context, req Request) (Result, error)
}

// Request is one fiat payout.
type Request struct {
	IdempotencyKey string
	MerchantID     uuid.UUID
	AmountUSD      decimal.Decimal
}

// Result is what the provider paid.
type Result struct {
	// Reference is the provider's id of the payout (given to the merchant
	// in settlement.completed).
	Reference string
	Currency  string
	// FXRate is units of Currency per USD.
	FXRate decimal.Decimal
	Amount decimal.Decimal
}

// ErrRefused is a payout the provider will not make as asked (unknown
// account, amount out of bounds). The settlement stays pending with the
// reason, for an operator; it is retried, never dropped.
var ErrRefused = errors.New("payout refused")
