package agentpay

import (
	"math/big"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func TestToBaseUnits(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"50", "50000000", false},
		{"49.95", "49950000", false},
		{"0.000001", "1", false},
		{"0.0000001", "", true},
		{"1000000.123456", "1000000123456", false},
		{"-2.5", "-2500000", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ToBaseUnits("amount", decimal.RequireFromString(tt.in), USDCDecimals)
			if tt.wantErr {
				require.Error(t, err)
				require.True(t, IsValidation(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.String())
			require.True(t, FromBaseUnits(got, USDCDecimals).Equal(decimal.RequireFromString(tt.in)))
		})
	}
	require.Equal(t, "0.000001", FromBaseUnits(big.NewInt(1), USDCDecimals).String())
}
