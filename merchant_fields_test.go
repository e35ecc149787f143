package agentpay

import (
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/chains/adapters"
)

func TestMerchantFieldRules(t *testing.T) {
	evmAddr := "0x52908400098527886E0F7030069857D2E4169EE7"
	solAddr := "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM"
	tests := []struct {
		name string
		in   MerchantInput
		err  string // "" = valid
	}{
		{"minimal", MerchantInput{}, ""},
		{"name trimmed", MerchantInput{Name: strp("  Acme  ")}, ""},
		{"email plus", MerchantInput{Email: strp("a+b@acme.co.uk")}, ""},
		{"email no local", MerchantInput{Email: strp("@acme.test")}, "email: is not a valid e-mail address"},
		{"email two ats", MerchantInput{Email: strp("a@b@acme.test")}, "email: is not a valid e-mail address"},
		{"http URL", MerchantInput{Website: strp("http://acme.test:8080/x?y=1")}, ""},
		{"URL with spaces", MerchantInput{Website: strp("https://acme.test/a b")}, "website: must be an absolute http or https URL"},
		{"URL relative", MerchantInput{SuccessURL: strp("/thanks")}, "success_url: must be an absolute http or https URL"},
		{"fiat_pix", MerchantInput{SettlementType: strp("fiat_pix")}, ""},
		{"address any family, EVM", MerchantInput{SettlementAddress: strp(evmAddr)}, ""},
		{"address any family, Solana", MerchantInput{SettlementAddress: strp(solAddr)}, ""},
		{"solana chain and address", MerchantInput{SettlementChain: strp("solana"), SettlementAddress: strp(solAddr)}, ""},
		{"polygon chain, Solana address", MerchantInput{SettlementChain: strp("polygon"), SettlementAddress: strp(solAddr)}, "settlement_address: is not a valid EVM address (settlement_chain is polygon)"},
		{"zero address", MerchantInput{SettlementAddress: strp("0x0000000000000000000000000000000000000000")}, "settlement_address: is not a valid EVM or Solana address"},
		{"every chain listed", MerchantInput{AcceptedTokens: &[]TokenRef{{Chain: "solana", Token: "USDC"}, {Chain: "polygon", Token: "USDC"}, {Chain: "ethereum", Token: "USDC"}, {Chain: "arbitrum", Token: "USDC"}, {Chain: "base", Token: "USDC"}}}, ""},
		{"token lower case", MerchantInput{AcceptedTokens: &[]TokenRef{{Chain: "base", Token: "usdc"}}}, "accepted_tokens: [0].token must be USDC"},
		{"upper case colour", MerchantInput{BrandColor: strp("#ABCDEF")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if in.Name == nil {
				in.Name = strp("Acme")
			}
			if in.Email == nil {
				in.Email = strp("a@acme.test")
			}
			var f merchantFields
			err := f.apply(in, true, false, adapters.Families())
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, IsValidation(err), "%v", err)
			require.EqualError(t, err, tt.err)
		})
	}

	var f merchantFields
	require.NoError(t, f.apply(MerchantInput{Name: strp(" Acme "), Email: strp("a@acme.test"), BrandColor: strp("#ABCDEF"),
		AcceptedTokens: &[]TokenRef{{Chain: "solana", Token: "USDC"}, {Chain: "base", Token: "USDC"}}}, true, false, adapters.Families()))
	require.Equal(t, "Acme", f.name)
	require.Equal(t, "#abcdef", f.brandColor)
	require.Equal(t, SettlementCryptoUSDC, f.settlementType, "default settlement type")
	require.Equal(t, []TokenRef{{Chain: "base", Token: "USDC"}, {Chain: "solana", Token: "USDC"}}, f.acceptedTokens, "API chain order")
}
