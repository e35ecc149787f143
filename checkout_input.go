package agentpay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/shopspring/decimal"
)

// validate checks a create request field by field in the order of spec 2.6
// and returns the metadata as it will be stored (json.Number values turned
// into float64 once they are known to be exact).
func (in SessionInput) validate() (map[string]any, error) {
	if in.Amount == nil {
		return nil, Invalid("amount", "is required")
	}
	a := *in.Amount
	switch {
	case !a.Equal(a.Truncate(SessionAmountDecimals)):
		return nil, Invalid("amount", "must have at most %d decimal places", SessionAmountDecimals)
	case a.LessThan(SessionMinAmount):
		return nil, Invalid("amount", "must be at least %s USD", SessionMinAmount.StringFixed(2))
	case a.GreaterThan(SessionMaxAmount):
		return nil, Invalid("amount", "must be at most %s USD", SessionMaxAmount.String())
	}
	switch {
	case in.Currency == "":
		return nil, Invalid("currency", "is required")
	case !strings.EqualFold(in.Currency, SessionCurrency):
		return nil, Invalid("currency", "must be USD")
	}
	if n := len([]rune(in.Description)); n > SessionDescriptionMaxLen {
		return nil, Invalid("description", "must be at most %d characters long", SessionDescriptionMaxLen)
	}
	if err := validateURL("success_url", in.SuccessURL, true); err != nil {
		return nil, err
	}
	if err := validateURL("cancel_url", in.CancelURL, true); err != nil {
		return nil, err
	}
	meta, err := normaliseMetadata(in.Metadata)
	if err != nil {
		return nil, err
	}
	if k := in.IdempotencyKey; k != nil {
		switch {
		case *k == "" || len(*k) > IdempotencyKeyMaxLen:
			return nil, Invalid("idempotency_key", "must be 1 to %d characters long", IdempotencyKeyMaxLen)
		case strings.IndexFunc(*k, func(r rune) bool { return !unicode.IsPrint(r) || r == unicode.ReplacementChar }) >= 0:
			return nil, Invalid("idempotency_key", "must contain printable characters only")
		}
	}
	return meta, nil
}

// normaliseMetadata checks the metadata object: at most
// SessionMetadataMaxBytes as JSON, and every number exactly representable
// as a JSON double (what it is read back as); it returns a copy with
// json.Number values converted.
func normaliseMetadata(m map[string]any) (map[string]any, error) {
	if m == nil {
		return map[string]any{}, nil
	}
	out, err := exactJSONValue(m, "metadata")
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, Invalid("metadata", "must be a JSON object")
	}
	if len(b) > SessionMetadataMaxBytes {
		return nil, Invalid("metadata", "must be at most %d bytes as JSON", SessionMetadataMaxBytes)
	}
	return out.(map[string]any), nil
}

func exactJSONValue(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := exactJSONValue(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := exactJSONValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.Number:
		exact, err := ParseDecimal(path, string(x))
		if err != nil {
			return nil, err
		}
		f, ferr := strconv.ParseFloat(string(x), 64)
		if ferr != nil || !decimal.NewFromFloat(f).Equal(exact) {
			return nil, Invalid(path, "number %s cannot be stored exactly; send it as a string", x)
		}
		return f, nil
	case string, bool, nil, float64:
		return x, nil
	default:
		return nil, Invalid(path, "is not a JSON value")
	}
}
