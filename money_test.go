package agentpay

import (
	"math/big"
	"strings"
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

// TestParseDecimal: text longer than MaxNumberLen is refused by its length,
// before the parser (quadratic in the digits) sees it.
func TestParseDecimal(t *testing.T) {
	million := strings.Repeat("7", 1_000_000)
	tests := []struct {
		name, in, want, err string
	}{
		{"amount", "49.95", "49.95", ""},
		{"exponent", "1e2", "100", ""},
		{"at the bound", "0." + strings.Repeat("0", MaxNumberLen-3) + "1", "0." + strings.Repeat("0", MaxNumberLen-3) + "1", ""},
		{"one past the bound", "0." + strings.Repeat("0", MaxNumberLen-2) + "1", "", "amount: must be a number of at most 64 characters"},
		{"a million digits", million, "", "amount: must be a number of at most 64 characters"},
		{"not a number", "12abc", "", "amount: must be a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDecimal("amount", tt.in)
			if tt.err != "" {
				require.True(t, IsValidation(err), "%v", err)
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.String())
		})
	}
}

// TestParseAmount: an amount is also refused when it is longer than
// MaxNumberLen written out, as answers write it: short text with an
// exponent can spell a long number. Found by FuzzDecimal and FuzzAmount
// (their inputs are seeds), which write what they read and read it back.
func TestParseAmount(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"amount", "49.95", "49.95", ""},
		{"exponent at the bound", "1e63", "1" + strings.Repeat("0", 63), ""},
		{"exponent past the bound", "1e64", "", "amount: must be a number of at most 64 characters written without an exponent"},
		{"a large exponent", "1e400", "", "amount: must be a number of at most 64 characters written without an exponent"},
		{"the largest exponent", "1e10000", "", "amount: must be a number of at most 64 characters written without an exponent"},
		{"a small exponent", "1e-10000", "", "amount: must be a number of at most 64 characters written without an exponent"},
		{"a negative exponent at the bound", "-1e-61", "-0." + strings.Repeat("0", 60) + "1", ""},
		{"too long as sent", strings.Repeat("7", MaxNumberLen+1), "", "amount: must be a number of at most 64 characters"},
		{"not a number", "12abc", "", "amount: must be a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAmount("amount", tt.in)
			if tt.err != "" {
				require.True(t, IsValidation(err), "%v", err)
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.String())
		})
	}
}

// BenchmarkParseDecimalMillionDigits is the cost of refusing a
// million-digit amount (decimal.NewFromString alone takes seconds on it).
func BenchmarkParseDecimalMillionDigits(b *testing.B) {
	s := strings.Repeat("7", 1_000_000)
	for b.Loop() {
		if _, err := ParseDecimal("amount", s); err == nil {
			b.Fatal("a million digits were parsed")
		}
	}
}
