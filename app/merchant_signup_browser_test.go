package app

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/mailmessage"
	"agentpay/internal/testenv"
)

// TestMerchantSignUpJourney walks a new merchant's first visit in headless
// Chromium, its mail through a real SMTP server: asked for the sign-up page
// signed out, the person signs in from the sign-in page and comes back to
// it (next); signs a merchant up (name, contact e-mail, settlement chain
// from a select and address); sees its keys once (a reload shows the
// empty form, not the keys); the contact address confirms from the link
// of the mail the SMTP server received; the person opens the dashboard
// from the keys page, lands on the new merchant and creates a session
// with the test key's mode. In test mode the settings show no form, say
// they are live mode's and link there; the link opens live mode's form.
// Being only a merchant, the person's home is the dashboard. axe-core runs
// on each new page and state.
func TestMerchantSignUpJourney(t *testing.T) {
	smtpSrv := testenv.NewSMTPServer(t)
	a := serveAppWith(t, appSetup{config: func(cfg *agentpay.Config, _ string) {
		cfg.AgentMode, cfg.Mailer = agentpay.ModeTest, smtpSrv.Mailer(t)
	}})
	env, svc, origin := a.env, a.svc, a.origin
	ctx := context.Background()
	// deliver sends the queued mail to an address through SMTP (the
	// send_mail job's step) and answers the links of what the server got.
	deliver := func(to string) []string {
		t.Helper()
		ms, err := env.DB.Ent.MailMessage.Query().Where(mailmessage.To(to)).Order(ent.Desc(mailmessage.FieldCreatedAt)).All(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, ms, "a mail to %s", to)
		require.NoError(t, svc.SendMail(ctx, ms[0].ID))
		got := smtpSrv.MessagesTo(to)
		require.NotEmpty(t, got, "the SMTP server received the mail to %s", to)
		return agentpay.MailLinks(got[len(got)-1].Text)
	}

	tctx := openBrowser(t, 4*time.Minute)
	wait := pollFor
	location := func() string {
		t.Helper()
		u, err := chromedp.Run(tctx, chromedp.Evaluate[string](`location.pathname + location.search`))
		require.NoError(t, err)
		return u
	}

	// Signed out, the sign-up page sends to sign in; the sign-in page
	// points merchants to it too.
	const person = "founder@journey.test"
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(origin+"/app/merchants/new"),
		chromedp.WaitVisible(`#merchant-pointer a[href="/app/merchants/new"]`),
	))
	require.Equal(t, "/app/signin?next=%2Fapp%2Fmerchants%2Fnew", location())
	require.NoError(t, chromedp.Do(tctx,
		chromedp.SetValue(`input[name=email]`, person),
		chromedp.Click(`form[action="/app/signin"] button[type=submit]`),
		chromedp.WaitVisible(`#sent`),
	))
	signIn := deliver(person)
	require.Len(t, signIn, 1)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(signIn[0]),
		chromedp.SetValue(`input[name=username]`, "journey_founder"),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#merchant-form`),
	))
	require.Equal(t, "/app/merchants/new", location(), "the sign-in came back to the page asked for")
	testenv.CheckAccessibility(t, tctx, "merchant sign-up form")

	// A refused field is shown as a sentence; nothing is created.
	require.NoError(t, chromedp.Do(tctx,
		chromedp.SetValue(`#merchant-name`, "Journey Coffee"),
		chromedp.SetValue(`#merchant-email`, "billing@journey.test"),
		chromedp.SetValue(`#merchant-chain`, "solana"),
		chromedp.SetValue(`#merchant-address`, "0x000000000000000000000000000000000000dEaD"),
		chromedp.Click(`#merchant-submit`),
		wait(`!document.getElementById("merchant-error").hidden`),
	))
	shown, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("merchant-error").textContent`))
	require.NoError(t, err)
	require.Contains(t, shown, "Solana address")
	require.NotContains(t, shown, "settlement_address:")
	n, err := env.DB.Ent.Merchant.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, chromedp.Do(tctx,
		chromedp.SetValue(`#merchant-chain`, "base"),
		chromedp.Click(`#merchant-submit`),
		chromedp.WaitVisible(`#merchant-keys`),
	))
	testenv.CheckAccessibility(t, tctx, "merchant keys shown once")
	keys, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[document.getElementById("key-test-secret-key").textContent,
		document.getElementById("key-live-secret-key").textContent, document.getElementById("keys-dashboard").getAttribute("href")]`))
	require.NoError(t, err)
	auth, err := svc.AuthenticateMerchant(ctx, keys[0])
	require.NoError(t, err, "the test secret key shown works")
	require.Equal(t, "Journey Coffee", auth.Merchant.Name)
	require.Equal(t, "base", auth.Merchant.SettlementChain)
	require.Equal(t, "/app/dashboard?merchant="+auth.Merchant.ID.String(), keys[2])

	// Shown once: a reload shows the form again and no key.
	require.NoError(t, chromedp.Do(tctx, chromedp.Reload(), chromedp.WaitVisible(`#merchant-form`)))
	html, err := chromedp.Run(tctx, chromedp.OuterHTML("html"))
	require.NoError(t, err)
	require.NotContains(t, html, keys[0])
	require.NotContains(t, html, keys[1])
	visible, err := chromedp.Run(tctx, chromedp.Evaluate[bool](`document.getElementById("merchant-keys").hidden`))
	require.NoError(t, err)
	require.True(t, visible, "the keys' section is hidden after a reload")

	// The contact address confirms from its mail's link.
	confirm := deliver("billing@journey.test")
	require.Len(t, confirm, 1)
	require.Contains(t, confirm[0], "/app/confirm-email/")
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(confirm[0]),
		chromedp.Click(`#confirm`),
		chromedp.WaitVisible(`#confirmed`),
	))

	// The dashboard, on the new merchant, in test mode: a session.
	view := func(name string) chromedp.Action[chromedp.Void] {
		return wait(`document.getElementById("dashboard").dataset.loaded === "` + name + `" && document.getElementById("dash-error").hidden`)
	}
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(origin+keys[2]+"#sessions"),
		view("sessions"),
		chromedp.SetValue(`#new-session-amount`, "12.50"),
		chromedp.Click(`#new-session`),
		view("session"),
	))
	picked, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[document.getElementById("merchant-picker").value, document.getElementById("session-amount").textContent, location.search]`))
	require.NoError(t, err)
	require.Equal(t, []string{auth.Merchant.ID.String(), "12.50 USD", ""}, picked)
	sessions, err := svc.ListSessions(ctx, auth, agentpay.ListParams{})
	require.NoError(t, err)
	require.Len(t, sessions.Sessions, 1, "the session was created in test mode")

	// Test mode: no settings form, a link to live mode, which shows it.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/dashboard#settings"), view("settings")))
	state, err := chromedp.Run(tctx, chromedp.Evaluate[[]bool](`[document.getElementById("settings-form").hidden,
		document.getElementById("settings-live-only").hidden, document.getElementById("brand-preview").hidden]`))
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, state, "test mode: no settings form, the note and its link instead")
	testenv.CheckAccessibility(t, tctx, "settings in test mode")
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Click(`#settings-go-live`),
		view("settings"),
		wait(`!document.getElementById("settings-form").hidden && document.getElementById("set-name").value === "Journey Coffee"`),
	))
	mode, err := chromedp.Run(tctx, chromedp.Evaluate[[]any](`[document.getElementById("mode-switch").checked, document.getElementById("settings-live-only").hidden]`))
	require.NoError(t, err)
	require.Equal(t, []any{false, true}, mode, "live mode: the switch off, the form shown")

	// Only a merchant: home is the dashboard (the dashboard's Home link
	// still opens the home page).
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/"), chromedp.WaitVisible(`#dash-bar`)))
	require.Equal(t, "/app/dashboard", location())
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/?home=1"), chromedp.WaitVisible(`#settings-link`)))
}
