package app

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/httpx"
)

// TestEveryAppAnswerHasTheCSP: every route the app serves, read from its
// own router (chi.Walk), so a page added later is covered without naming
// it here, answers with the strict Content-Security-Policy and the other
// protective headers, to a visitor and to a signed-in person alike,
// whatever the answer is (a page, a redirect, JSON, a file, a refusal).
// The policy allows no inline script or style and no other host.
func TestEveryAppAnswerHasTheCSP(t *testing.T) {
	a := newAppEnv(t)
	visitor, signedIn := a.browser(t), a.browser(t)
	a.signIn(t, signedIn, "csp_ann")

	type route struct{ method, pattern string }
	var routes []route
	require.NoError(t, chi.Walk(NewHandler(Config{Service: a.svc, Prefix: "/app"}).(chi.Routes),
		func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			routes = append(routes, route{method, pattern})
			return nil
		}))
	// The walk sees the app's pages (so it is not vacuous).
	patterns := make([]string, len(routes))
	for i, r := range routes {
		patterns[i] = r.method + " " + r.pattern
	}
	for _, want := range []string{"GET /app/", "GET /app/signin", "GET /app/settings", "GET /app/dashboard", "GET /app/invite/{token}", "POST /app/signin/{token}"} {
		require.Contains(t, patterns, want)
	}

	for _, r := range routes {
		path := r.pattern
		path = strings.ReplaceAll(path, "{token}", "sil_not_a_token")
		path = strings.ReplaceAll(path, "/*", "/ui.js")
		require.NotContains(t, path, "{", "a route parameter the test does not fill: %s", r.pattern)
		for who, c := range map[string]*http.Client{"visitor": visitor, "signed in": signedIn} {
			req, err := http.NewRequest(r.method, a.srv.URL+path, strings.NewReader(url.Values{"email": {"x@example.com"}}.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := c.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			requireProtected(t, resp, who+" "+r.method+" "+path)
		}
	}

	// The signed-in pages render (not only redirect) with it.
	for _, page := range []string{"/app/", "/app/settings", "/app/dashboard"} {
		resp, body := get(t, signedIn, a.srv.URL+page)
		require.Equal(t, http.StatusOK, resp.StatusCode, page)
		requireProtected(t, resp, page)
		requireNoInlineCode(t, body, page)
	}
	// And so do the pages before a session, an unknown path under the app
	// and a refused request.
	for _, page := range []string{"/app/signin", "/app/invite/inv_nope", "/app/nope"} {
		resp, body := get(t, visitor, a.srv.URL+page)
		requireProtected(t, resp, page)
		requireNoInlineCode(t, body, page)
	}
}

// requireProtected: the answer carries the app's policy, which allows
// nothing inline and no other host, and the other headers.
func requireProtected(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	csp := resp.Header.Get("Content-Security-Policy")
	require.Equal(t, contentSecurityPolicy, csp, what)
	for _, directive := range []string{"default-src 'none'", "script-src 'self';", "style-src 'self';", "connect-src 'self';",
		"base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"} {
		require.Contains(t, csp, directive, what)
	}
	for _, loose := range []string{"unsafe", "*", "http:", "https:", "data:", "blob:"} {
		require.NotContains(t, csp, loose, what)
	}
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), what)
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), what)
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), what)
}

var (
	inlineScript  = regexp.MustCompile(`(?is)<script(?:\s[^>]*)?>\s*[^<\s]`)
	scriptTag     = regexp.MustCompile(`(?is)<script[^>]*>`)
	inlineHandler = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	inlineStyle   = regexp.MustCompile(`(?i)<style|\sstyle\s*=`)
	otherHost     = regexp.MustCompile(`(?i)(src|href|action)\s*=\s*"(https?:)?//`)
)

// requireNoInlineCode: a page has nothing the policy would refuse: no
// inline script, event handler or style, nothing loaded from another host.
func requireNoInlineCode(t *testing.T, body, what string) {
	t.Helper()
	require.NotRegexp(t, inlineScript, body, what)
	for _, tag := range scriptTag.FindAllString(body, -1) {
		require.Contains(t, tag, ` src="`, "%s: a script is a file: %s", what, tag)
	}
	require.NotRegexp(t, inlineHandler, body, what)
	require.NotRegexp(t, inlineStyle, body, what)
	require.NotRegexp(t, otherHost, body, what)
}

// signIn signs a new person in on the browser b (its cookie jar), through
// an e-mailed link as the sign-in form does.
func (a *appEnv) signIn(t *testing.T, b *http.Client, username string) *agentpay.Viewer {
	t.Helper()
	ctx := context.Background()
	email := username + "@example.com"
	_, err := a.svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: username})
	require.NoError(t, err)
	require.NoError(t, a.svc.RequestSignIn(ctx, email, "192.0.2.1"))
	link := a.mailedLink(t, email)
	in, err := a.svc.CompleteSignIn(ctx, link[strings.LastIndex(link, "/")+1:], nil, "test")
	require.NoError(t, err)
	u, err := url.Parse(a.srv.URL)
	require.NoError(t, err)
	b.Jar.SetCookies(u, []*http.Cookie{{Name: httpx.SessionCookie, Value: in.SessionToken, Path: "/"}})
	v, err := a.svc.AuthenticateBrowser(ctx, in.SessionToken)
	require.NoError(t, err)
	return v
}
