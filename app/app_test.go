package app

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/mailmessage"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// appEnv is the app on a test server over a service that mails.
type appEnv struct {
	env *testenv.Env
	svc *agentpay.Service
	srv *httptest.Server
}

func newAppEnv(t *testing.T) *appEnv {
	t.Helper()
	env := testenv.New(t, testenv.Options{Jobs: true})
	var cfg agentpay.Config
	env.Fill(&cfg)
	cfg.AppURL = "http://app.test/app"
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(NewHandler(Config{Service: svc, Prefix: "/app", GraphQLPath: "/graphql"}))
	t.Cleanup(srv.Close)
	return &appEnv{env: env, svc: svc, srv: srv}
}

// browser is a client with a cookie jar that does not follow redirects.
func (a *appEnv) browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func post(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

var formTokenPattern = regexp.MustCompile(`name="form_token" value="([^"]+)"`)

func formToken(t *testing.T, body string) string {
	t.Helper()
	m := formTokenPattern.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	return m[1]
}

// mailedLink is the path of the newest link mailed to an address.
func (a *appEnv) mailedLink(t *testing.T, to string) string {
	t.Helper()
	m, err := a.env.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).
		Order(mailmessage.ByCreatedAt()).All(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, m)
	links := agentpay.MailLinks(m[len(m)-1].Text)
	require.Len(t, links, 1)
	return strings.TrimPrefix(links[0], "http://app.test")
}

func TestSignInPages(t *testing.T) {
	a := newAppEnv(t)
	b := a.browser(t)
	base := a.srv.URL + "/app"

	// Signed out, home and the dashboard send to the sign-in form.
	resp, _ := get(t, b, base+"/dashboard")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/app/signin?next=%2Fapp%2Fdashboard", resp.Header.Get("Location"), "the page asked for is kept for after the sign-in")
	resp, _ = get(t, b, base+"/")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/app/signin", resp.Header.Get("Location"))

	resp, body := get(t, b, base+"/signin")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	token := formToken(t, body)

	// A form without its token (another site's) changes nothing.
	resp, _ = post(t, b, base+"/signin", url.Values{"email": {"ann@example.com"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, body = post(t, b, base+"/signin", url.Values{"email": {"ann@example.com"}, "form_token": {token}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Check your e-mail")
	resp, body = post(t, b, base+"/signin", url.Values{"email": {"nope"}, "form_token": {token}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "not a valid e-mail address")

	// Opening the link (GET, as a mail scanner does) spends nothing.
	link := a.mailedLink(t, "ann@example.com")
	for range 2 {
		resp, body = get(t, b, a.srv.URL+link)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "Create your account")
	}
	resp, _ = post(t, b, a.srv.URL+link, url.Values{"username": {"ann_app"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no form token")
	resp, body = post(t, b, a.srv.URL+link, url.Values{"form_token": {formToken(t, body)}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a new account needs a username")
	resp, _ = post(t, b, a.srv.URL+link, url.Values{"username": {"ann_app"}, "display_name": {"Ann"}, "form_token": {formToken(t, body)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/app/", resp.Header.Get("Location"))

	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == httpx.SessionCookie {
			session = c
		}
	}
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, session.SameSite)
	require.False(t, session.Secure, "http APP_URL")
	require.Equal(t, "/", session.Path, "the app's script sends it to /graphql")

	// The link is spent; the session opens home, with its CSRF token.
	resp, _ = post(t, b, a.srv.URL+link, url.Values{"username": {"ann_app"}, "form_token": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, body = get(t, b, base+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "ann_app")
	// The withdraw form, its fields and result line by the ids and names
	// home.js and the browser test use.
	for _, want := range []string{`id="withdraw-form"`, `<select name="chain">`, `name="address"`, `name="amount"`, `id="withdraw-result"`, `id="withdrawals"`} {
		require.Contains(t, body, want)
	}
	v, err := a.svc.AuthenticateBrowser(context.Background(), session.Value)
	require.NoError(t, err)
	require.Contains(t, body, `data-csrf="`+v.CSRFToken()+`"`)

	// The merchant dashboard's shell: the same session, the page's script
	// and the always-visible mode switch.
	resp, body = get(t, b, base+"/dashboard")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, want := range []string{`data-csrf="` + v.CSRFToken() + `"`, `data-graphql="/graphql"`, `id="mode-switch"`, `id="merchant-picker"`, `/app/assets/dashboard.js`} {
		require.Contains(t, body, want)
	}

	// Signing out needs the session's CSRF token.
	resp, _ = post(t, b, base+"/signout", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	_, err = a.svc.AuthenticateBrowser(context.Background(), session.Value)
	require.NoError(t, err, "still signed in")
	resp, _ = post(t, b, base+"/signout", url.Values{"csrf_token": {v.CSRFToken()}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, err = a.svc.AuthenticateBrowser(context.Background(), session.Value)
	require.ErrorIs(t, err, agentpay.ErrNotSignedIn)
	// The sign-in page it lands on says so.
	require.Equal(t, "/app/signin?signed_out=here", resp.Header.Get("Location"))
	_, body = get(t, b, a.srv.URL+resp.Header.Get("Location"))
	require.Contains(t, body, `<p id="notice" class="note" role="status">You are signed out of this browser.</p>`)
}

func TestSecureCookieUnderHTTPS(t *testing.T) {
	a := newAppEnv(t)
	h := NewHandler(Config{Service: a.svc, Prefix: "/app", SecureCookies: true})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/app/signin", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotEmpty(t, rec.Result().Cookies(), "the form sets its token cookie")
	for _, c := range rec.Result().Cookies() {
		require.True(t, c.Secure, c.Name)
		require.True(t, c.HttpOnly, c.Name)
	}
}

// mailedLinkTo is the path of the newest link mailed to an address whose
// path starts with prefix.
func (a *appEnv) mailedLinkTo(t *testing.T, to, prefix string) string {
	t.Helper()
	ms, err := a.env.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).
		Order(mailmessage.ByCreatedAt(), mailmessage.ByID()).All(context.Background())
	require.NoError(t, err)
	for i := len(ms) - 1; i >= 0; i-- {
		for _, l := range agentpay.MailLinks(ms[i].Text) {
			if p := strings.TrimPrefix(l, "http://app.test"); strings.HasPrefix(p, prefix) {
				return p
			}
		}
	}
	require.Fail(t, "no "+prefix+" link mailed to "+to)
	return ""
}

func TestInvitationSignUpPage(t *testing.T) {
	a := newAppEnv(t)
	ctx := context.Background()
	reg, err := a.svc.QuickRegister(ctx, "inviting_bot")
	require.NoError(t, err)
	_, err = a.svc.InviteHuman(ctx, reg.Agent, "bea@example.com")
	require.NoError(t, err)
	path := a.mailedLinkTo(t, "bea@example.com", "/app/invite/inv_")

	b := a.browser(t)
	resp, body := get(t, b, a.srv.URL+path)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "inviting_bot invites you")
	require.Contains(t, body, "bea@example.com")
	require.Contains(t, body, `id="decline"`)
	resp, _ = post(t, b, a.srv.URL+path, url.Values{"username": {"bea_app"}, "form_token": {formToken(t, body)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	ps, err := a.svc.AgentPairings(ctx, reg.Agent)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, agentpay.PairingApproved, ps[0].Status)
	require.Equal(t, "bea_app", ps[0].User.Username)
	require.NotNil(t, ps[0].User.EmailVerifiedAt, "the e-mailed link proves the address")
	resp, body = get(t, b, a.srv.URL+"/app/")
	require.Equal(t, http.StatusOK, resp.StatusCode, "signed in by signing up")
	require.Contains(t, body, "bea_app")

	resp, _ = get(t, b, a.srv.URL+"/app/invite/inv_"+strings.Repeat("x", 43))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// The page an agent is answered ({app_url}/invite/<invitation id>) proves
// nothing: it offers no sign-up, and posting one to it is refused, no
// account made; it declines nothing either.
func TestInvitationReferencePageProvesNothing(t *testing.T) {
	a := newAppEnv(t)
	ctx := context.Background()
	reg, err := a.svc.QuickRegister(ctx, "inviting_bot")
	require.NoError(t, err)
	inv, err := a.svc.InviteHuman(ctx, reg.Agent, "owner@shop.test")
	require.NoError(t, err)
	path := strings.TrimPrefix(inv.URL, "http://app.test")
	require.Equal(t, "/app/invite/"+inv.Invitation.ID.String(), path)

	b := a.browser(t)
	resp, body := get(t, b, a.srv.URL+path)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "inviting_bot invites you")
	require.Contains(t, body, `id="reference"`)
	require.NotContains(t, body, `id="signup"`)
	require.NotContains(t, body, `id="decline"`)
	_, signIn := get(t, b, a.srv.URL+"/app/signin") // the browser's form token, from any form
	token := formToken(t, signIn)
	resp, body = post(t, b, a.srv.URL+path, url.Values{"username": {"mallory"}, "form_token": {token}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "open the link in the invitation e-mail")
	_, err = a.svc.UserByEmail(ctx, "owner@shop.test")
	require.ErrorIs(t, err, agentpay.ErrNotFound, "no account made")
	resp, _ = post(t, b, a.srv.URL+path+"/decline", url.Values{"form_token": {token}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
}

// Declining from the e-mailed link's page: the agent cannot invite the
// address again.
func TestDeclineInvitationPage(t *testing.T) {
	a := newAppEnv(t)
	ctx := context.Background()
	reg, err := a.svc.QuickRegister(ctx, "inviting_bot")
	require.NoError(t, err)
	_, err = a.svc.InviteHuman(ctx, reg.Agent, "bea@example.com")
	require.NoError(t, err)
	path := a.mailedLinkTo(t, "bea@example.com", "/app/invite/inv_")

	b := a.browser(t)
	_, body := get(t, b, a.srv.URL+path)
	resp, _ := post(t, b, a.srv.URL+path+"/decline", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no form token")
	resp, body = post(t, b, a.srv.URL+path+"/decline", url.Values{"form_token": {formToken(t, body)}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="declined"`)
	resp, _ = get(t, b, a.srv.URL+path)
	require.Equal(t, http.StatusConflict, resp.StatusCode, "a declined invitation is not accepted")
	_, err = a.svc.InviteHuman(ctx, reg.Agent, "bea@example.com")
	require.Error(t, err)
}

// The unsubscribe link of an agent's mail: GET shows it (a mail scanner
// unsubscribes nobody), POST unsubscribes.
func TestUnsubscribePage(t *testing.T) {
	a := newAppEnv(t)
	ctx := context.Background()
	reg, err := a.svc.QuickRegister(ctx, "inviting_bot")
	require.NoError(t, err)
	_, err = a.svc.InviteHuman(ctx, reg.Agent, "bea@example.com")
	require.NoError(t, err)
	path := a.mailedLinkTo(t, "bea@example.com", "/app/unsubscribe/uns_")
	token := strings.TrimPrefix(path, "/app/unsubscribe/")

	b := a.browser(t)
	var body string
	for range 2 {
		var resp *http.Response
		resp, body = get(t, b, a.srv.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "bea@example.com")
		require.Contains(t, body, `id="unsubscribe"`)
	}
	link, err := a.svc.CheckUnsubscribeLink(ctx, token)
	require.NoError(t, err)
	require.False(t, link.Unsubscribed)
	resp, _ := post(t, b, a.srv.URL+path, url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no form token")
	resp, body = post(t, b, a.srv.URL+path, url.Values{"form_token": {formToken(t, body)}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="unsubscribed"`)
	link, err = a.svc.CheckUnsubscribeLink(ctx, token)
	require.NoError(t, err)
	require.True(t, link.Unsubscribed)
	resp, _ = get(t, b, a.srv.URL+"/app/unsubscribe/uns_"+strings.Repeat("x", 43))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// A merchant contact e-mail's confirmation page: GET shows it, POST
// confirms, once.
func TestConfirmMerchantEmailPage(t *testing.T) {
	a := newAppEnv(t)
	ctx := context.Background()
	name, email := "Page Shop", "owner@shop.test"
	reg, err := a.svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	path := a.mailedLinkTo(t, email, "/app/confirm-email/mec_")

	b := a.browser(t)
	var body string
	for range 2 {
		var resp *http.Response
		resp, body = get(t, b, a.srv.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "Page Shop")
		require.Contains(t, body, `id="confirm"`)
	}
	m, err := a.svc.MerchantByID(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.Nil(t, m.EmailVerifiedAt, "opening the link confirms nothing")
	resp, _ := post(t, b, a.srv.URL+path, url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no form token")
	token := formToken(t, body)
	resp, body = post(t, b, a.srv.URL+path, url.Values{"form_token": {token}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="confirmed"`)
	m, err = a.svc.MerchantByID(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.NotNil(t, m.EmailVerifiedAt)
	resp, _ = post(t, b, a.srv.URL+path, url.Values{"form_token": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "used once")
}

// TestFavicon: every page names the app's icon, which is served (a
// browser asks /favicon.ico otherwise, a 404 in every log).
func TestFavicon(t *testing.T) {
	a := newAppEnv(t)
	b := a.browser(t)
	_, body := get(t, b, a.srv.URL+"/app/signin")
	require.Contains(t, body, `<link rel="icon" href="/app/assets/favicon.svg" type="image/svg+xml">`)
	resp, svg := get(t, b, a.srv.URL+"/app/assets/favicon.svg")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "image/svg+xml", resp.Header.Get("Content-Type"))
	require.Contains(t, svg, "<svg")
}

// TestOneStylesheet: the app's pages link the stylesheet they share with
// the hosted checkout page (internal/uikit), which the app serves itself
// (its CSP allows styles from its own origin only) as CSS with the
// components of both: the app's tables and the page's layout.
func TestOneStylesheet(t *testing.T) {
	a := newAppEnv(t)
	b := a.browser(t)
	_, body := get(t, b, a.srv.URL+"/app/signin")
	require.Contains(t, body, `<link rel="stylesheet" href="/app/assets/ui.css">`)
	require.Contains(t, body, `<body class="app">`)
	resp, css := get(t, b, a.srv.URL+"/app/assets/ui.css")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
	requireProtected(t, resp, "the stylesheet")
	for _, component := range []string{".grid", ".empty", "dialog", ":focus-visible", "input[type=color]", ".checkout", ".notice"} {
		require.Contains(t, css, component)
	}
	resp, _ = get(t, b, a.srv.URL+"/app/assets/app.css")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no second stylesheet")
}
