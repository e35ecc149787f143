package rest

import (
	"net/http"
	"testing"
)

// validateOpenAPI checks one exchange against the served OpenAPI document.
// Temporary no-op until the document exists (issue 3).
func validateOpenAPI(t *testing.T, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
}
