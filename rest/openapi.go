package rest

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 description of the REST facade. It is
// written by hand; the REST tests validate every answer they receive against
// it (openapi_validate_test.go), so it cannot drift from the handlers.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns the served OpenAPI document (a copy).
func OpenAPIDocument() []byte {
	return append([]byte(nil), openAPIDocument...)
}

// openAPI serves the document at GET /openapi.json.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
