package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/graph"
	"agentpay/internal/testenv"
)

// servedApp is the app and the GraphQL API on one origin, as the binary
// serves them, at http://localhost:PORT: WebAuthn takes localhost as a
// relying party id, and no IP address. The browser tests' one server.
type servedApp struct {
	env    *testenv.Env
	svc    *agentpay.Service
	origin string
}

// appSetup is what a browser test adds to the served app.
type appSetup struct {
	// env is the test environment's options (its jobs always run).
	env testenv.Options
	// config adds to the service's configuration, given the origin.
	config func(cfg *agentpay.Config, origin string)
	// routes adds handlers beside the app's and GraphQL's.
	routes func(mux *http.ServeMux, svc *agentpay.Service)
}

// serveApp serves the app with the defaults: jobs, passkeys on localhost.
func serveApp(t *testing.T) *servedApp { return serveAppWith(t, appSetup{}) }

func serveAppWith(t *testing.T, setup appSetup) *servedApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	origin := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	opts := setup.env
	opts.Jobs = true
	env := testenv.New(t, opts)
	cfg := agentpay.Config{BaseURL: origin, PayURL: origin, AppURL: origin + "/app",
		PasskeyRPID: "localhost", PasskeyOrigins: []string{origin}}
	if setup.config != nil {
		setup.config(&cfg, origin)
	}
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/graphql", graph.NewHandler(graph.HandlerConfig{Service: svc, Logger: cfg.Logger}))
	mux.Handle("/app/", NewHandler(Config{Service: svc, Logger: cfg.Logger, Prefix: "/app", URL: cfg.AppURL, GraphQLPath: "/graphql"}))
	if setup.routes != nil {
		setup.routes(mux, svc)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &servedApp{env: env, svc: svc, origin: origin}
}

// newestLink is the newest link mailed to an address.
func (a *servedApp) newestLink(t *testing.T, to string) string {
	t.Helper()
	m, err := a.env.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).
		Order(ent.Desc(mailmessage.FieldCreatedAt), ent.Desc(mailmessage.FieldID)).First(context.Background())
	require.NoError(t, err)
	links := agentpay.MailLinks(m.Text)
	require.Len(t, links, 1)
	return links[0]
}

// linkTo is the newest link mailed to an address whose path holds
// pathPart (a mail may hold several links).
func (a *servedApp) linkTo(t *testing.T, to, pathPart string) string {
	t.Helper()
	ms, err := a.env.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).Order(mailmessage.ByCreatedAt()).All(context.Background())
	require.NoError(t, err)
	for i := len(ms) - 1; i >= 0; i-- {
		for _, l := range agentpay.MailLinks(ms[i].Text) {
			if strings.Contains(l, pathPart) {
				return l
			}
		}
	}
	t.Fatalf("no link with %s mailed to %s", pathPart, to)
	return ""
}

// openBrowser starts a headless browser for the test, failing it on any
// Content-Security-Policy violation a page reports, and returns its
// context, ended after timeout.
func openBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	bctx := testenv.StartBrowser(t)
	testenv.RefuseCSPViolations(t, bctx)
	ctx, cancel := context.WithTimeout(bctx, timeout)
	t.Cleanup(cancel)
	return ctx
}

// pollFor waits up to 30 s for the page's JavaScript condition cond.
func pollFor(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(30*time.Second))
}

// evalString is what js evaluates to in the page, as a string.
func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	require.NoError(t, err)
	return v
}

// addPasskeyAuthenticator gives the browser a virtual platform
// authenticator (discoverable passkeys, the user verified, presence
// simulated), as a phone or laptop with a passkey would be.
func addPasskeyAuthenticator(t *testing.T, ctx context.Context) webauthn.AuthenticatorID {
	t.Helper()
	_, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{})
	require.NoError(t, err)
	id, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21,
			Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true,
		}})
	require.NoError(t, err)
	return id.AuthenticatorID
}

// signUpWithPasskey signs a new person up by e-mail link in the browser
// and adds a passkey in settings ("Virtual key"), the authenticator
// added first; it ends on the settings page.
func (a *servedApp) signUpWithPasskey(t *testing.T, ctx context.Context, email, username string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(a.origin+"/app/signin")))
	addPasskeyAuthenticator(t, ctx)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`#passkey-signin`),
		chromedp.SetValue(`input[name=email]`, email),
		chromedp.Click(`form[action="/app/signin"] button[type=submit]`),
		chromedp.WaitVisible(`#sent`),
	))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.SetValue(`input[name=username]`, username),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#settings-link`),
		chromedp.Click(`#settings-link`),
		chromedp.WaitVisible(`#sessions li`),
		chromedp.SetValue(`#passkey-name`, "Virtual key"),
		chromedp.Click(`#add-passkey`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#passkeys li").length === 1`, chromedp.WithPollingTimeout(30*time.Second)),
	))
}
