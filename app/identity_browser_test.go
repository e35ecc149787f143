package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/graph"
	"agentpay/identity/sandbox"
	"agentpay/internal/testenv"
)

// TestIdentityConfirmedOnReturn: a person verifies their identity on the
// sandbox provider's hosted page, whose signed callback reaches the
// service, and is sent back to the home, which says so in a sentence
// ("Your identity is verified.") rather than leaving them to spot a
// status word change.
func TestIdentityConfirmedOnReturn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	origin := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	sb, err := sandbox.New(sandbox.Config{Secret: []byte("sandbox-callback-secret-of-32-bytes!"),
		CallbackURL: origin + "/identity/callbacks/" + sandbox.Name})
	require.NoError(t, err)
	env := testenv.New(t, testenv.Options{Jobs: true})
	cfg := agentpay.Config{BaseURL: origin, PayURL: origin, AppURL: origin + "/app", IdentityProvider: sb}
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/graphql", graph.NewHandler(graph.HandlerConfig{Service: svc, Logger: cfg.Logger}))
	mux.Handle("/app/", NewHandler(Config{Service: svc, Logger: cfg.Logger, Prefix: "/app", URL: cfg.AppURL, GraphQLPath: "/graphql"}))
	mux.Handle("/dev/kyc/", sb.Handler())
	// The provider's callback, as REST serves it (rest/identity.go).
	mux.HandleFunc("POST /identity/callbacks/{provider}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = svc.HandleIdentityCallback(r.Context(), r.PathValue("provider"), r.Header, body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	a := &servedApp{env: env, svc: svc, origin: origin}

	ctx := context.Background()
	email := "verified.person@example.com"
	_, err = svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "verified_person"})
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, email, "192.0.2.1"))

	bctx := testenv.StartBrowser(t)
	tctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	wait := func(cond string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(30*time.Second))
	}
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#total`),
		wait(`document.getElementById("identity-status").textContent === "not started"`),
	))
	said, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("identity-result").textContent`))
	require.NoError(t, err)
	require.Empty(t, said, "nothing to confirm before a verification")
	require.NoError(t, chromedp.Do(tctx,
		clickJS(`#verify-identity`),
		chromedp.WaitVisible(`#kyc-verified`),
		clickJS(`#kyc-verified`),
		chromedp.WaitVisible(`#total`),
		wait(`document.getElementById("identity-status").textContent === "verified"`),
	))
	said, err = liveText(tctx, `#identity-result`)
	require.NoError(t, err)
	require.Equal(t, "Your identity is verified.", said)
	where, err := chromedp.Run(tctx, chromedp.Evaluate[string](`location.pathname + location.search`))
	require.NoError(t, err)
	require.Equal(t, "/app/", where, "the return marker is dropped, so a reload says nothing again")
}
