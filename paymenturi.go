package agentpay

import (
	"math/big"
	"net/url"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// EIP681TransferURI is the EIP-681 request to call the token contract's
// transfer(address,uint256) on chain chainID:
//
//	ethereum:<token>@<chainId>/transfer?address=<to>&uint256=<base units>
//
// The amount is in the token's base units, as EIP-681 requires for uint256
// parameters (wallets such as MetaMask scale it with the token's decimals for
// display). It is written as a plain integer, never in exponent form.
func EIP681TransferURI(token string, chainID uint64, to string, units *big.Int) string {
	var b strings.Builder
	b.WriteString("ethereum:")
	b.WriteString(token)
	b.WriteString("@")
	b.WriteString(strconv.FormatUint(chainID, 10))
	b.WriteString("/transfer?address=")
	b.WriteString(to)
	b.WriteString("&uint256=")
	b.WriteString(units.String())
	return b.String()
}

// SolanaPayURI is a Solana Pay transfer request for an SPL token:
//
//	solana:<recipient>?amount=<decimal>&spl-token=<mint>&label=<label>&message=<message>
//
// amount is in user units (12.5, not base units), written without exponent
// or trailing zeros. label and message are percent-encoded (a space is %20,
// as in the Solana Pay examples) and left out when empty. recipient is the
// wallet (owner) address: the paying wallet sends to its associated token
// account.
func SolanaPayURI(recipient string, amount decimal.Decimal, mint, label, message string) string {
	var b strings.Builder
	b.WriteString("solana:")
	b.WriteString(recipient)
	b.WriteString("?amount=")
	b.WriteString(amount.String())
	b.WriteString("&spl-token=")
	b.WriteString(mint)
	if label != "" {
		b.WriteString("&label=")
		b.WriteString(uriComponent(label))
	}
	if message != "" {
		b.WriteString("&message=")
		b.WriteString(uriComponent(message))
	}
	return b.String()
}

// uriComponent percent-encodes s for a query value, with %20 for spaces
// (QueryEscape's "+" is read as a literal plus by some wallets).
func uriComponent(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
