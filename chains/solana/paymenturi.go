package solana

import (
	"net/url"
	"strings"

	"github.com/shopspring/decimal"

	"agentpay/chains"
)

// PaymentURI is a Solana Pay transfer request for an SPL token:
//
//	solana:<recipient>?amount=<decimal>&spl-token=<mint>&label=<label>&message=<message>
//
// amount is in user units (12.5, not base units), written without exponent
// or trailing zeros. label and message are percent-encoded (a space is %20,
// as in the Solana Pay examples) and left out when empty. The recipient is
// the wallet (owner) address: the paying wallet sends to its associated
// token account.
func (Wallets) PaymentURI(r chains.PaymentRequest) string {
	var b strings.Builder
	b.WriteString("solana:")
	b.WriteString(r.To)
	b.WriteString("?amount=")
	b.WriteString(decimal.NewFromBigInt(r.Amount, -r.Decimals).String())
	b.WriteString("&spl-token=")
	b.WriteString(r.Token)
	if r.Label != "" {
		b.WriteString("&label=")
		b.WriteString(uriComponent(r.Label))
	}
	if r.Message != "" {
		b.WriteString("&message=")
		b.WriteString(uriComponent(r.Message))
	}
	return b.String()
}

// uriComponent percent-encodes s for a query value, with %20 for spaces
// (QueryEscape's "+" is read as a literal plus by some wallets).
func uriComponent(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
