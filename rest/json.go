package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"

	"agentpay"
	"agentpay/internal/httpx"
)

// decodeJSON reads a JSON object body (capped by the router's limitBody)
// strictly: unknown fields and trailing data are refused, so a typo in a
// field name is an error, not a silent default.
func decodeJSON(r *http.Request, dst any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var syntax *json.SyntaxError
		var typeErr *json.UnmarshalTypeError
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return httpx.ErrBodyTooLarge
		case errors.As(err, new(net.Error)):
			// The connection failed or timed out (ReadTimeout): no detail
			// of it is the client's business.
			return agentpay.Invalid("", "request body could not be read")
		case errors.Is(err, io.EOF):
			return agentpay.Invalid("", "request body must be a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return agentpay.Invalid("", "malformed JSON: unexpected end of body")
		case errors.As(err, &syntax):
			return agentpay.Invalid("", "malformed JSON at byte %d", syntax.Offset)
		case errors.As(err, &typeErr) && typeErr.Type == httpx.AmountType:
			return agentpay.Invalid(typeErr.Field, "%s", typeErr.Value)
		case errors.As(err, &typeErr):
			return agentpay.Invalid(typeErr.Field, "must be a %s", jsonKind(typeErr.Type.Kind().String()))
		default:
			return agentpay.Invalid("", "%s", err.Error())
		}
	}
	// The rest must be white space, read to its end so that a body over
	// the cap is refused however it was sent.
	rest, err := io.ReadAll(io.MultiReader(dec.Buffered(), r.Body))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return httpx.ErrBodyTooLarge
	case err != nil:
		return agentpay.Invalid("", "request body could not be read")
	case len(bytes.TrimSpace(rest)) > 0:
		return agentpay.Invalid("", "request body must hold one JSON object")
	}
	return nil
}

// decodeOptionalJSON is decodeJSON for a body that may be left out: an empty
// body leaves dst as it is.
func decodeOptionalJSON(r *http.Request, dst any) error {
	body, err := io.ReadAll(r.Body) // capped by the router's limitBody
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return httpx.ErrBodyTooLarge
	case err != nil:
		return agentpay.Invalid("", "request body could not be read")
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
