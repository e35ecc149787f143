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
// than MaxNumberLen without parsing it. REST and GraphQL read every amount
// through it (by ParseAmount), metadata numbers directly.
func ParseDecimal(field, s string) (decimal.Decimal, error) {
	if len(s) > MaxNumberLen {
		return decimal.Decimal{}, Invalid(field, "must be a number of at most %d characters", MaxNumberLen)
	}
	d, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Decimal{}, Invalid(field, "must be a number")
	}
	return d, nil
}

// ParseAmount is ParseDecimal for an amount, which answers write out in
// full: it also refuses a number longer than MaxNumberLen written out. An
// exponent makes short text a long number: 1e400 is 401 digits in every
// answer that shows it, an answer the API would then refuse to read back.
// The decimal package caps exponents at 10,000, so writing it out costs
// microseconds. (Metadata numbers are kept as JSON numbers, 1e400 as such,
// so they need only ParseDecimal.)
func ParseAmount(field, s string) (decimal.Decimal, error) {
	d, err := ParseDecimal(field, s)
	if err != nil {
		return d, err
	}
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
