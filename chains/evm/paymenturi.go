package evm

import (
	"strconv"
	"strings"

	"agentpay/chains"
)

// PaymentURI is the EIP-681 request to call the token contract's
// transfer(address,uint256) on chain r.ChainID:
//
//	ethereum:<token>@<chainId>/transfer?address=<to>&uint256=<base units>
//
// The amount is in the token's base units, as EIP-681 requires for uint256
// parameters (wallets such as MetaMask scale it with the token's decimals for
// display). It is written as a plain integer, never in exponent form. EIP-681
// has no label or message.
func (Wallets) PaymentURI(r chains.PaymentRequest) string {
	var b strings.Builder
	b.WriteString("ethereum:")
	b.WriteString(r.Token)
	b.WriteString("@")
	b.WriteString(strconv.FormatUint(r.ChainID, 10))
	b.WriteString("/transfer?address=")
	b.WriteString(r.To)
	b.WriteString("&uint256=")
	b.WriteString(r.Amount.String())
	return b.String()
}
