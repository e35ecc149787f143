package app

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/identity/sandbox"
)

// TestIdentityConfirmedOnReturn: a person verifies their identity on the
// sandbox provider's hosted page, whose signed callback reaches the
// service, and is sent back to the home, which says so in a sentence
// ("Your identity is verified.") rather than leaving them to spot a
// status word change.
func TestIdentityConfirmedOnReturn(t *testing.T) {
	var sb *sandbox.Sandbox
	a := serveAppWith(t, appSetup{
		config: func(cfg *agentpay.Config, origin string) {
			var err error
			sb, err = sandbox.New(sandbox.Config{Secret: []byte("sandbox-callback-secret-of-32-bytes!"),
				CallbackURL: origin + "/identity/callbacks/" + sandbox.Name})
			require.NoError(t, err)
			cfg.IdentityProvider = sb
		},
		routes: func(mux *http.ServeMux, svc *agentpay.Service) {
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
		},
	})
	svc := a.svc

	ctx := context.Background()
	email := "verified.person@example.com"
	_, err := svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "verified_person"})
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 2*time.Minute)
	wait := pollFor
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
