package agentpay

import (
	"math/big"

	"github.com/shopspring/decimal"
)

// USDCDecimals is USDC's precision on every supported chain.
const USDCDecimals int32 = 6

// MaxNumberLen bounds the text of a number the API reads (amounts, and
// numbers inside metadata). decimal.NewFromString is quadratic in the digits
// (a million digits cost about 3 s of CPU), so an over-long number is
// refused by its length before it is parsed. No amount needs more than a
// few dozen characters: the largest session, 1000000 with 6 decimals, is
// 14.
const MaxNumberLen = 64

// ParseDecimal reads an exact decimal number for field, refusing text longer
// than MaxNumberLen without parsing it, and a number longer than that once
// written out. REST and GraphQL read every amount through it.
func ParseDecimal(field, s string) (decimal.Decimal, error) {
	if len(s) > MaxNumberLen {
		return decimal.Decimal{}, Invalid(field, "must be a number of at most %d characters", MaxNumberLen)
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, Invalid(field, "must be a number")
	}
	// An exponent makes short text a long number: 1e400 is 401 digits as
	// every answer writes it, an answer the API would then refuse to read
	// back. The decimal package caps exponents at 10,000, so writing it
	// out here costs microseconds.
	if len(d.String()) > MaxNumberLen {
		return decimal.Decimal{}, Invalid(field, "must be a number of at most %d characters written without an exponent", MaxNumberLen)
	}
	return d, nil
}

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
