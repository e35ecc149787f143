package uikit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStylesheet: ui.css is answered as CSS, never sniffed, cacheable,
// and a conditional GET with the served Last-Modified is 304.
func TestStylesheet(t *testing.T) {
	rec := httptest.NewRecorder()
	Stylesheet(rec, httptest.NewRequest(http.MethodGet, "/pay"+Path, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/css; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	require.Equal(t, "public, max-age=3600", rec.Header().Get("Cache-Control"))
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	require.Equal(t, css, body)

	req := httptest.NewRequest(http.MethodGet, "/app"+Path, nil)
	req.Header.Set("If-Modified-Since", rec.Header().Get("Last-Modified"))
	rec = httptest.NewRecorder()
	Stylesheet(rec, req)
	require.Equal(t, http.StatusNotModified, rec.Code)
}
