package sandbox

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/payout"
)

// TestPix holds the sandbox to what a real provider does: a payout per
// key, the conversion rounded to centavos, refusals of what cannot be
// paid.
func TestPix(t *testing.T) {
	ctx := context.Background()
	merchant := uuid.New()
	for _, tc := range []struct {
		name    string
		key     string
		amount  string
		want    string
		wantErr error
	}{
		{name: "converts at the rate, rounded to centavos", key: "a", amount: "7.24275", want: "39.34"},
		{name: "one base unit", key: "b", amount: "0.000001", want: "0"},
		{name: "zero is refused", key: "c", amount: "0", wantErr: payout.ErrRefused},
		{name: "negative is refused", key: "d", amount: "-1", wantErr: payout.ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(DefaultRate)
			r, err := p.Payout(ctx, payout.Request{IdempotencyKey: tc.key, MerchantID: merchant, AmountUSD: decimal.RequireFromString(tc.amount)})
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Zero(t, p.Payouts())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Amount.String())
			require.Equal(t, "BRL", r.Currency)
			require.Equal(t, 1, p.Payouts())
		})
	}

	t.Run("the same key is the same payout", func(t *testing.T) {
		p := New(DefaultRate)
		req := payout.Request{IdempotencyKey: "settlement:1", MerchantID: merchant, AmountUSD: decimal.RequireFromString("10")}
		first, err := p.Payout(ctx, req)
		require.NoError(t, err)
		again, err := New(DefaultRate).Payout(ctx, req)
		require.NoError(t, err)
		require.Equal(t, first.Reference, again.Reference, "a restarted sandbox answers the same reference")
		second, err := p.Payout(ctx, payout.Request{IdempotencyKey: "settlement:2", MerchantID: merchant, AmountUSD: decimal.RequireFromString("10")})
		require.NoError(t, err)
		require.NotEqual(t, first.Reference, second.Reference)
		require.Equal(t, 2, p.Payouts())
	})

	t.Run("no key, no payout", func(t *testing.T) {
		_, err := New(DefaultRate).Payout(ctx, payout.Request{MerchantID: merchant, AmountUSD: decimal.RequireFromString("1")})
		require.Error(t, err)
	})
}
