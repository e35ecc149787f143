package app

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/stepup"
	"agentpay/ent/user"
	"agentpay/internal/httpx"
)

// TestPasskeysInBrowser drives the app in headless Chromium with its
// virtual authenticator (a platform authenticator holding discoverable
// passkeys and verifying its user): sign up by e-mail link, add a passkey
// in settings, sign out, sign in with the passkey, rename, and revoke
// another browser's session.
func TestPasskeysInBrowser(t *testing.T) {
	a := serveApp(t)
	ctx := openBrowser(t, 3*time.Minute)
	wait := func(cond string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(15*time.Second))
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		require.NoError(t, err, sel)
		return v
	}
	// until waits for a condition of the page across the navigations a
	// script starts (an evaluation on a page being replaced fails: asked
	// again).
	until := func(cond string) {
		t.Helper()
		require.Eventually(t, func() bool {
			done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
			return err == nil && done
		}, 20*time.Second, 100*time.Millisecond, cond)
	}
	location := func() string {
		t.Helper()
		l, err := chromedp.Run(ctx, chromedp.Location())
		require.NoError(t, err)
		return l
	}

	// The tab's virtual authenticator.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(a.origin+"/app/signin")))
	authenticator := addPasskeyAuthenticator(t, ctx)

	// Sign up by e-mail link.
	email := "passkey.person@example.com"
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(`#passkey-signin`),
		chromedp.SetValue(`input[name=email]`, email),
		chromedp.Click(`form[action="/app/signin"] button[type=submit]`),
		chromedp.WaitVisible(`#sent`),
	))
	link := a.newestLink(t, email)
	require.True(t, strings.HasPrefix(link, a.origin+"/app/signin/"), link)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.SetValue(`input[name=username]`, "passkey_person"),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#settings-link`),
	))
	u, err := a.env.DB.Ent.User.Query().Where(user.Email(email)).Only(context.Background())
	require.NoError(t, err)

	// Settings: add a passkey.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#settings-link`),
		chromedp.WaitVisible(`#sessions li`),
		chromedp.SetValue(`#passkey-name`, "Virtual key"),
		chromedp.Click(`#add-passkey`),
		wait(`document.querySelectorAll("#passkeys li").length === 1`),
	))
	require.Contains(t, text(`#passkeys li`), "Virtual key")
	require.Contains(t, text(`#sessions li.current`), "This browser")
	creds, err := chromedp.Call(ctx, webauthn.GetCredentials, webauthn.GetCredentialsParams{AuthenticatorID: authenticator})
	require.NoError(t, err)
	require.Len(t, creds.Credentials, 1)
	require.True(t, creds.Credentials[0].IsResidentCredential, "discoverable: sign-in names no user")
	require.Equal(t, "localhost", creds.Credentials[0].RpID)
	stored, err := a.svc.UserPasskeys(context.Background(), u)
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.Equal(t, creds.Credentials[0].CredentialID, stored[0].CredentialID)
	require.Nil(t, stored[0].LastUsedAt)

	// Sign out (this browser's session, from the list), then in with the
	// passkey.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#sessions li.current button.revoke-session`)))
	until(`!!document.getElementById("passkey-signin")`)
	require.True(t, strings.HasSuffix(location(), "/app/signin"), location())
	// Clicked from the page's script once it has loaded: the sign-out's
	// redirects can replace the document under a node chromedp found
	// ("Could not find node with given id").
	until(`document.readyState === "complete" && !!document.getElementById("passkey-signin")`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("passkey-signin").click()`)))
	// Home, or the sign-in page's error, shown (so a failure says why).
	until(`!!document.getElementById("settings-link") || !document.getElementById("passkey-error").hidden`)
	if l := location(); strings.HasSuffix(l, "/app/signin") {
		t.Fatalf("passkey sign-in failed: %s", text(`#passkey-error`))
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(`#settings-link`)))
	require.Equal(t, "passkey_person", text(`#username`))
	stored, err = a.svc.UserPasskeys(context.Background(), u)
	require.NoError(t, err)
	require.NotNil(t, stored[0].LastUsedAt, "the sign-in used it")

	// Rename.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#settings-link`),
		chromedp.WaitVisible(`#sessions li`),
		wait(`document.getElementById("display-name").value === ""`),
		chromedp.SetValue(`#display-name`, "Pat Passkey"),
		chromedp.Click(`#display-name-form button[type=submit]`),
		chromedp.WaitVisible(`#display-name-saved`),
	))
	require.Equal(t, "Saved.", text(`#display-name-saved`), "feedback is a sentence")
	u, err = a.env.DB.Ent.User.Get(context.Background(), u.ID)
	require.NoError(t, err)
	require.Equal(t, "Pat Passkey", u.DisplayName)

	// Another browser signs in (by link); this one sees it and revokes it.
	require.NoError(t, a.svc.RequestSignIn(context.Background(), email, "192.0.2.50"))
	token := strings.TrimPrefix(a.newestLink(t, email), a.origin+"/app/signin/")
	other, err := a.svc.CompleteSignIn(context.Background(), token, nil, "Other browser/1.0")
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Reload(),
		wait(`document.querySelectorAll("#sessions li").length === 2`),
	))
	require.Contains(t, text(`#sessions li:not(.current)`), "Other browser/1.0")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#sessions li:not(.current) button.revoke-session`),
		wait(`document.querySelectorAll("#sessions li").length === 1`),
	))
	_, err = a.svc.AuthenticateBrowser(context.Background(), other.SessionToken)
	require.ErrorIs(t, err, agentpay.ErrNotSignedIn, "the other browser is signed out")
	require.Contains(t, text(`#sessions li`), "This browser")

	// The passkey's deletion, last: nothing left to sign in with. It takes
	// the step-up, an assertion of the passkey (the virtual authenticator
	// answers it), begun for this passkey.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#passkeys li button.delete-passkey`),
		wait(`document.getElementById("confirm-dialog").open && document.getElementById("confirm-text").textContent.includes("You can no longer sign in or approve payments with it")`),
		chromedp.Click(`#confirm-ok`),
		wait(`document.querySelectorAll("#passkeys li").length === 0`),
	))
	stored, err = a.svc.UserPasskeys(context.Background(), u)
	require.NoError(t, err)
	require.Empty(t, stored)
	used, err := a.env.DB.Ent.StepUp.Query().Where(stepup.UserID(u.ID), stepup.ActionEQ(stepup.ActionRemovePasskey),
		stepup.MethodEQ(stepup.MethodPasskey), stepup.UsedAtNotNil()).Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, used, "removed with a passkey assertion")
}

// TestPasskeySignInEndpoints: the pre-session endpoints want the page's
// form token, answer errors as {detail}, and set the session cookie only
// for a passkey that checks out.
func TestPasskeySignInEndpoints(t *testing.T) {
	a := newAppEnv(t)
	b := a.browser(t)
	base := a.srv.URL + "/app"
	_, body := get(t, b, base+"/signin")
	require.Contains(t, body, `id="passkey-signin"`)
	token := formToken(t, body)

	resp, body := post(t, b, base+"/signin/passkey/begin", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no form token")
	require.Contains(t, body, `"detail"`)
	resp, body = post(t, b, base+"/signin/passkey/begin", url.Values{"form_token": {token}})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"ceremony_id"`)
	require.Contains(t, body, `"rpId":"app.test"`)
	require.Contains(t, body, `"userVerification":"required"`)

	resp, body = post(t, b, base+"/signin/passkey/finish", url.Values{"form_token": {token},
		"ceremony_id": {"00000000-0000-0000-0000-000000000000"}, "credential": {`{"id":"x"}`}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	for _, c := range resp.Cookies() {
		require.NotEqual(t, httpx.SessionCookie, c.Name, "nobody signed in")
	}
}
