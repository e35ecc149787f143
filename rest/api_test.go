package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// apiResponse is an answer already checked against the OpenAPI document.
type apiResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r apiResponse) JSON(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Body, v), string(r.Body))
}

// Map decodes the body as an object.
func (r apiResponse) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// do sends one request; body is marshalled to JSON unless it is a string
// (sent as is) or nil. Every answer is validated against the OpenAPI
// document, so the document cannot drift from the code.
func (a *testAPI) do(method, path string, body any, header http.Header) apiResponse {
	a.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(a.t, err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.Server.URL+path, bytes.NewReader(raw))
	require.NoError(a.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := a.Server.Client().Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, out)
	// ACP's paths answer ACP's Error shape (acp_test.go validates it).
	if resp.StatusCode >= 400 && !strings.HasPrefix(path, "/checkout_sessions") {
		var e map[string]any
		require.NoError(a.t, json.Unmarshal(out, &e), string(out))
		require.Len(a.t, e, 1, "an error body is {detail} only: %s", out)
		require.IsType(a.t, "", e["detail"], string(out))
	}
	validateOpenAPI(a.t, req, raw, resp, out)
	return apiResponse{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

// agentKey is the header set of an authenticated agent request.
func agentKey(key string) http.Header { return http.Header{"X-Agent-Key": {key}} }
