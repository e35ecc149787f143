package solana

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

func TestPaymentURI(t *testing.T) {
	const (
		to   = "mvines9iiHiQTysrwkJjGf2gb9Ex9jXJX8ns3qwf2kN"
		mint = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
	)
	tests := []struct {
		name           string
		units          int64
		label, message string
		want           string
	}{
		{"plain", 12_500_000, "Shop", "Order 42",
			"solana:" + to + "?amount=12.5&spl-token=" + mint + "&label=Shop&message=Order%2042"},
		{"whole amount, no trailing zeros", 1_000_000, "Shop", "",
			"solana:" + to + "?amount=1&spl-token=" + mint + "&label=Shop"},
		{"smallest unit", 1, "", "",
			"solana:" + to + "?amount=0.000001&spl-token=" + mint},
		{"a million dollars, no exponent", 1_000_000_000_000, "", "",
			"solana:" + to + "?amount=1000000&spl-token=" + mint},
		{"reserved characters are encoded", 500_000, "Ben & Jerry's", "a+b=c?/#ü",
			"solana:" + to + "?amount=0.5&spl-token=" + mint + "&label=Ben%20%26%20Jerry%27s&message=a%2Bb%3Dc%3F%2F%23%C3%BC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Wallets{}.PaymentURI(chains.PaymentRequest{
				Token: mint, Decimals: 6, To: to, Amount: big.NewInt(tt.units), Label: tt.label, Message: tt.message,
			})
			require.Equal(t, tt.want, got)
		})
	}
}
