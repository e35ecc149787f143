// Package scalar holds the GraphQL scalars the schema adds to gqlgen's.
package scalar

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/shopspring/decimal"

	"agentpay"
)

// MarshalDecimal writes an exact amount as a bare JSON number, as every
// amount in the API is.
func MarshalDecimal(d decimal.Decimal) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, d.String()) })
}

// UnmarshalDecimal reads a number (variables arrive as json.Number and keep
// every digit) or a numeric string, through agentpay.ParseAmount, which
// refuses one longer than agentpay.MaxNumberLen before parsing it or once
// written out.
func UnmarshalDecimal(v any) (decimal.Decimal, error) {
	switch v := v.(type) {
	case json.Number:
		return agentpay.ParseAmount("", string(v))
	case string:
		return agentpay.ParseAmount("", v)
	case int64:
		return decimal.NewFromInt(v), nil
	case int:
		return decimal.NewFromInt(int64(v)), nil
	case float64:
		// A literal in the query text: its shortest round-trip form is
		// what the client wrote.
		return agentpay.ParseAmount("", strconv.FormatFloat(v, 'f', -1, 64))
	default:
		return decimal.Decimal{}, fmt.Errorf("a Decimal must be a number, got %T", v)
	}
}
