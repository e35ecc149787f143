package httpx

import (
	"bytes"
	"encoding/json"
	"reflect"

	"github.com/shopspring/decimal"

	"agentpay"
)

// Amount is a money amount that travels as a JSON number, never a string,
// and is held exactly: every facade's amounts, in and out.
type Amount struct{ decimal.Decimal }

// USD is d as an Amount.
func USD(d decimal.Decimal) Amount { return Amount{Decimal: d} }

// MarshalJSON writes the exact decimal as a bare JSON number.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON accepts only a JSON number the service takes as an amount
// (ParseAmount). A refusal is a *json.UnmarshalTypeError, so that the
// decoder names the field: its Type is AmountType when the service refused
// the number (Value is then the service's reason), a float64's when the
// value was not a number at all.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] == '"' || bytes.Equal(b, []byte("null")) {
		return &json.UnmarshalTypeError{Value: "non-number", Type: reflect.TypeFor[float64]()}
	}
	d, err := agentpay.ParseAmount("", string(b))
	if err != nil {
		return &json.UnmarshalTypeError{Value: err.Error(), Type: AmountType}
	}
	a.Decimal = d
	return nil
}

// AmountType marks an amount the service refused among a decoder's type
// errors.
var AmountType = reflect.TypeFor[Amount]()
