package app

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSignInReturnsToNext: a sign-in goes back to the app page the person
// was going to (the sign-in form's next, kept in a cookie until the
// e-mailed link is followed), and only to a page of the app on this
// origin: an absolute URL, a scheme-relative //host, a backslash, a path
// leaving the app or a control character lands on the home page instead.
func TestSignInReturnsToNext(t *testing.T) {
	a := newAppEnv(t)
	base := a.srv.URL + "/app"
	for i, tc := range []struct{ next, want string }{
		{"/app/merchants/new", "/app/merchants/new"},
		{"/app/dashboard?merchant=x#settings", "/app/dashboard?merchant=x#settings"},
		{"https://evil.test/app/", "/app/"},
		{"//evil.test/app/", "/app/"},
		{"/\\evil.test/app/", "/app/"},
		{"/app/\\\\evil.test", "/app/"},
		{"/app/../evil", "/app/"},
		{"/app/%2e%2e/evil", "/app/"},
		{"javascript:alert(1)", "/app/"},
		{"/app/x\r\nSet-Cookie: a=b", "/app/"},
		{"/elsewhere", "/app/"},
		{"", "/app/"},
	} {
		t.Run(tc.next, func(t *testing.T) {
			b := a.browser(t)
			resp, body := get(t, b, base+"/signin?next="+url.QueryEscape(tc.next))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			email := "next" + string(rune('a'+i)) + "@example.com"
			resp, _ = post(t, b, base+"/signin", url.Values{"email": {email}, "form_token": {formToken(t, body)}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			link := a.mailedLink(t, email)
			_, body = get(t, b, a.srv.URL+link)
			resp, _ = post(t, b, a.srv.URL+link, url.Values{"username": {"next_" + string(rune('a'+i))}, "form_token": {formToken(t, body)}})
			require.Equal(t, http.StatusSeeOther, resp.StatusCode)
			require.Equal(t, tc.want, resp.Header.Get("Location"))
		})
	}

	// A signed-out visit to a page asks the sign-in to come back to it.
	resp, _ := get(t, a.browser(t), base+"/merchants/new")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/app/signin?next=%2Fapp%2Fmerchants%2Fnew", resp.Header.Get("Location"))
}
