package evm

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains"
)

func TestPaymentURI(t *testing.T) {
	tests := []struct {
		name    string
		token   string
		chainID uint64
		to      string
		units   *big.Int
		want    string
	}{
		{"base mainnet", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", 8453, "0x52908400098527886E0F7030069857D2E4169EE7", big.NewInt(12_500_000),
			"ethereum:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453/transfer?address=0x52908400098527886E0F7030069857D2E4169EE7&uint256=12500000"},
		{"one unit", "0x036CbD53842c5426634e7929541eC2318f3dCF7e", 84532, "0x8617E340B3D01FA5F11F306F4090FD50E238070D", big.NewInt(1),
			"ethereum:0x036CbD53842c5426634e7929541eC2318f3dCF7e@84532/transfer?address=0x8617E340B3D01FA5F11F306F4090FD50E238070D&uint256=1"},
		{"a million dollars stays an integer, no exponent", "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359", 137, "0xde709f2102306220921060314715629080e2fb77", big.NewInt(1_000_000_000_000),
			"ethereum:0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359@137/transfer?address=0xde709f2102306220921060314715629080e2fb77&uint256=1000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Wallets{}.PaymentURI(chains.PaymentRequest{
				ChainID: tt.chainID, Token: tt.token, Decimals: 6, To: tt.to, Amount: tt.units,
				Label: "Shop", Message: "EIP-681 has no label or message",
			})
			require.Equal(t, tt.want, got)
		})
	}
}
