package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"agentpay/identity/sandbox"
	"agentpay/internal/testdb"
)

// TestServeAnswersNoDevRoute: every /dev route of the router `agentpay
// dev` serves (devHTTPHandler), read from that router itself (chi.Walk),
// so a dev route added later is covered without being named here, answers
// 404 from the router `agentpay serve` serves (serveHTTPHandler), for
// every method dev routes it for. Each path the test makes matches its
// route in dev's router (the answer there may be a 404 of the route's
// own, an unknown sandbox page), and no route in serve's.
func TestServeAnswersNoDevRoute(t *testing.T) {
	env := map[string]string{}
	if testdb.IsPostgres() {
		env["DATABASE_URL"] = testdb.Open(t).URL
	}
	cfg, svc := newTestService(t, env)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	kyc, err := sandbox.New(sandbox.Config{Secret: make([]byte, 32), PagePath: devKYCPath, CallbackURL: "http://127.0.0.1:1/identity/callbacks/" + sandbox.Name})
	require.NoError(t, err)
	dev := devHTTPHandler(cfg, svc, logger, kyc.Handler(), nil)
	serve := serveHTTPHandler(cfg, svc, logger, nil)

	type route struct{ method, pattern string }
	var devRoutes []route
	devRouter, ok := dev.(chi.Routes)
	require.True(t, ok, "dev's handler is the chi router (rest.NewRouter)")
	serveRouter, ok := serve.(chi.Routes)
	require.True(t, ok, "serve's handler is the chi router (rest.NewRouter)")
	require.NoError(t, chi.Walk(devRouter, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if pattern == "/dev" || strings.HasPrefix(pattern, "/dev/") {
			devRoutes = append(devRoutes, route{method, pattern})
		}
		return nil
	}))
	// The walk sees the dev routes (it is not vacuous): each kind, by the
	// path it has today.
	var seen []string
	for _, r := range devRoutes {
		seen = append(seen, r.pattern)
	}
	for _, want := range []string{"/dev/faucet", "/dev/chains", "/dev/mail", "/dev/partner/attest", "/dev/partner/jwks.json", "/dev/card/charge", "/dev/kyc/*"} {
		require.Contains(t, seen, want)
	}

	param := regexp.MustCompile(`\{[^}]*\}`)
	for _, r := range devRoutes {
		path := param.ReplaceAllString(r.pattern, "x")
		path = strings.TrimSuffix(path, "*") + map[bool]string{true: "page", false: ""}[strings.HasSuffix(path, "*")]
		t.Run(r.method+" "+path, func(t *testing.T) {
			require.True(t, devRouter.Match(chi.NewRouteContext(), r.method, path), "dev routes it")
			require.False(t, serveRouter.Match(chi.NewRouteContext(), r.method, path), "serve has no %s %s", r.method, r.pattern)
			require.Equal(t, http.StatusNotFound, answer(serve, r.method, path), "serve answers %s %s", r.method, path)
		})
	}
}

// answer is the status h answers a request of method to path with, as a
// client on loopback with an empty JSON body.
func answer(h http.Handler, method, path string) int {
	req := httptest.NewRequest(method, path, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}
