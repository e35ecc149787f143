package agentpay

import (
	"math/big"

	"github.com/shopspring/decimal"
)

// USDCDecimals is USDC's precision on every supported chain.
const USDCDecimals int32 = 6

// USDCAmount is an amount of USDC base units (as agents' counters and
// transfers store them) in USD: 1 USDC is 1 USD.
func USDCAmount(units int64) decimal.Decimal {
	return decimal.New(units, -USDCDecimals)
}

// ToBaseUnits converts a token amount to integer base units, refusing amounts
// with more decimals than the token has rather than rounding them away.
func ToBaseUnits(field string, amount decimal.Decimal, decimals int32) (*big.Int, error) {
	if !amount.Equal(amount.Truncate(decimals)) {
		return nil, Invalid(field, "has more than %d decimal places", decimals)
	}
	return amount.Shift(decimals).BigInt(), nil
}

// FromBaseUnits converts integer base units to a token amount.
func FromBaseUnits(units *big.Int, decimals int32) decimal.Decimal {
	return decimal.NewFromBigInt(units, -decimals)
}
