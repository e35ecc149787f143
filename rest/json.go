package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"

	"github.com/shopspring/decimal"

	"agentpay"
)

// maxBodyBytes bounds request bodies; every request of the API is small.
const maxBodyBytes = 1 << 20

// decodeJSON reads a JSON object body strictly: unknown fields and trailing
// data are refused, so a typo in a field name is an error, not a silent default.
func decodeJSON(r *http.Request, dst any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var syntax *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return agentpay.Invalid("", "request body must be a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return agentpay.Invalid("", "malformed JSON: unexpected end of body")
		case errors.As(err, &syntax):
			return agentpay.Invalid("", "malformed JSON at byte %d", syntax.Offset)
		case errors.As(err, &typeErr):
			return agentpay.Invalid(typeErr.Field, "must be a %s", jsonKind(typeErr.Type.Kind().String()))
		default:
			return agentpay.Invalid("", "%s", err.Error())
		}
	}
	if dec.More() {
		return agentpay.Invalid("", "request body must hold one JSON object")
	}
	return nil
}

// decodeOptionalJSON is decodeJSON for a body that may be left out: an empty
// body leaves dst as it is.
func decodeOptionalJSON(r *http.Request, dst any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return agentpay.Invalid("", "cannot read the request body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return decodeJSON(r, dst)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct":
		return "object"
	default:
		return "number"
	}
}

// decimalType names the expected kind ("number") in type errors.
var decimalType = reflect.TypeOf(float64(0))

// Amount is a money amount that travels as a JSON number, never a string,
// and is held exactly.
type Amount struct{ decimal.Decimal }

// MarshalJSON writes the exact decimal as a bare JSON number.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON accepts only a JSON number.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] == '"' || bytes.Equal(b, []byte("null")) {
		return &json.UnmarshalTypeError{Value: "non-number", Type: decimalType}
	}
	d, err := decimal.NewFromString(string(b))
	if err != nil {
		return fmt.Errorf("invalid number: %w", err)
	}
	a.Decimal = d
	return nil
}
