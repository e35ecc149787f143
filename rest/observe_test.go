package rest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/stretchr/testify/require"
)

// The request id observe gives a request is chi's RequestID's: the
// client's X-Request-Id if it sent one, else the process's prefix and a
// counter of at least six digits, read back by middleware.GetReqID.
func TestObserveNamesRequests(t *testing.T) {
	var got []string
	mux := (&server{logger: discardLogger()}).newMux()
	mux.Get("/x", func(w http.ResponseWriter, r *http.Request) {
		got = append(got, middleware.GetReqID(r.Context()))
	})
	for _, sent := range []string{"", "", "client-chosen"} {
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		if sent != "" {
			req.Header.Set(middleware.RequestIDHeader, sent)
		}
		mux.ServeHTTP(httptest.NewRecorder(), req)
	}
	require.Len(t, got, 3)
	var first, second uint64
	_, err := fmt.Sscanf(got[0], requestIDPrefix+"-%d", &first)
	require.NoError(t, err, got[0])
	_, err = fmt.Sscanf(got[1], requestIDPrefix+"-%d", &second)
	require.NoError(t, err, got[1])
	require.Equal(t, first+1, second)
	require.Equal(t, "client-chosen", got[2])

	for n, want := range map[uint64]string{1: "000001", 42: "000042", 99999: "099999", 123456: "123456", 1234567: "1234567"} {
		require.Equal(t, fmt.Sprintf("%s-%06d", requestIDPrefix, n), formatRequestID(n))
		require.Equal(t, requestIDPrefix+"-"+want, formatRequestID(n))
	}
}
