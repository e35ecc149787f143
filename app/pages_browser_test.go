package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/payment"
	"agentpay/internal/testenv"
)

// screenshots keeps the page walk's PNGs in a directory (`go test ./app
// -run TestPagesFitAndPassAxe -screenshots /tmp/shots`); by default they
// go to the test's temporary directory. They are looked at (docs/humans.md
// and docs/dashboard.md show them), not compared.
var screenshots = flag.String("screenshots", "", "directory to keep the app's page screenshots in")

// pageWidths are a phone's and a desktop's.
var pageWidths = []struct {
	name          string
	width, height int64
}{
	{"phone", 390, 844},
	{"desktop", 1280, 800},
}

// TestPagesFitAndPassAxe visits every page of the app and every view of
// the merchant dashboard, signed out and signed in as a merchant's owner,
// at 390 and 1280 px, and at each: nothing overflows horizontally
// (scrollWidth <= innerWidth: tables become stacked rows on a phone), and
// axe-core (testenv.CheckAccessibility) finds no serious or critical
// WCAG 2 A/AA violation. A confirmation dialog is checked open. Each
// state's screenshot is kept (-screenshots DIR).
func TestPagesFitAndPassAxe(t *testing.T) {
	a := serveAppWith(t, appSetup{config: func(cfg *agentpay.Config, _ string) { cfg.AgentMode = agentpay.ModeTest }})
	env, svc, origin := a.env, a.svc, a.origin
	ctx := context.Background()

	// The merchant, its owner (who signs in below), and the links of every
	// page a mail opens, unspent.
	name, ownerEmail := "Pages Shop With A Rather Long Name", "owner@pages.test"
	_, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &ownerEmail})
	require.NoError(t, err)
	confirmLink := a.linkTo(t, ownerEmail, "/confirm-email/")
	owner, err := svc.CreateUser(ctx, agentpay.NewUser{Email: ownerEmail, Username: "pages_owner"})
	require.NoError(t, err)
	reg, err := svc.QuickRegister(ctx, "pages_agent")
	require.NoError(t, err)
	_, err = svc.InviteHuman(ctx, reg.Agent, "invitee@pages.test")
	require.NoError(t, err)
	inviteLink, unsubscribeLink := a.linkTo(t, "invitee@pages.test", "/invite/"), a.linkTo(t, "invitee@pages.test", "/unsubscribe/")
	require.NoError(t, svc.RequestSignIn(ctx, "newcomer@pages.test", "192.0.2.1"))
	newAccountLink := a.linkTo(t, "newcomer@pages.test", "/signin/")
	_, err = svc.BeginStepUp(ctx, &agentpay.Viewer{User: owner}, agentpay.StepUpRequest{Action: agentpay.StepUpWithdraw,
		Withdrawal: &agentpay.WithdrawRequest{ToAddress: "0x000000000000000000000000000000000000dEaD", AmountUSD: decimal.RequireFromString("1234.5"), Chain: "base"}})
	require.NoError(t, err)
	stepUpLink := a.linkTo(t, ownerEmail, "/step-up/")

	tctx := openBrowser(t, 6*time.Minute)
	wait := pollFor
	const loaded = `document.readyState === "complete"`

	// The contact e-mail's page, then confirmed (the owner's membership),
	// and the owner signed in with an e-mailed link.
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	width := pageWidths[0]
	look := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		file := filepath.Join(dir, fmt.Sprintf("app-%s-%s.png", name, width.name))
		require.NoError(t, os.WriteFile(file, png, 0o644))
		t.Logf("screenshot %s", file)
		widths, err := chromedp.Run(tctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		require.NoError(t, err)
		require.EqualValues(t, width.width, widths[1])
		require.LessOrEqual(t, widths[0], widths[1], "%s at %d px: nothing overflows horizontally", name, width.width)
		testenv.CheckAccessibility(t, tctx, name+" at "+width.name+" width")
	}
	// Signed out, at both widths first: the links stay unspent.
	_, err = chromedp.Call(tctx, network.ClearBrowserCookies, cdp.Empty{})
	require.NoError(t, err)
	for _, w := range pageWidths {
		width = w
		require.NoError(t, chromedp.Do(tctx, chromedp.EmulateViewport(w.width, w.height)))
		for _, v := range []struct{ name, url, ready string }{
			{"signin", origin + "/app/signin", loaded},
			{"signin-link-new-account", newAccountLink, `!!document.querySelector('input[name="username"]')`},
			{"signin-link-used-or-unknown", origin + "/app/signin/nope", `!!document.querySelector(".error")`},
			{"invitation", inviteLink, `!!document.getElementById("signup")`},
			{"unsubscribe", unsubscribeLink, `!!document.getElementById("unsubscribe")`},
			{"confirm-email", confirmLink, `!!document.getElementById("confirm")`},
			{"step-up", stepUpLink, `!!document.getElementById("stepup-confirm")`},
		} {
			require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(v.url), wait(v.ready)), v.name)
			look(v.name)
		}
		email := w.name + ".visitor@pages.test"
		require.NoError(t, chromedp.Do(tctx,
			chromedp.Navigate(origin+"/app/signin"),
			chromedp.SetValue(`input[name=email]`, email),
			chromedp.Click(`form[action="/app/signin"] button[type=submit]`),
			chromedp.WaitVisible(`#sent`),
		))
		look("signin-sent")
	}

	// Signed in as the merchant's owner (its contact e-mail confirmed).
	_, err = svc.ConfirmMerchantEmail(ctx, confirmLink[strings.LastIndex(confirmLink, "/")+1:])
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, ownerEmail, "192.0.2.1"))
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.linkTo(t, ownerEmail, "/signin/")),
		chromedp.Click(`#continue`),
		// Only a merchant: signed in, the owner lands on the dashboard.
		chromedp.WaitVisible(`#dashboard`),
	))
	for _, w := range pageWidths {
		width = w
		require.NoError(t, chromedp.Do(tctx,
			chromedp.EmulateViewport(w.width, w.height),
			chromedp.Navigate(origin+"/app/?home=1"),
			wait(`document.getElementById("identity-status").textContent !== "…"`),
		))
		look("home")
		if w == pageWidths[0] {
			// The one money format and the sentences errors are shown as
			// (app/static/ui.js), a table run in the page.
			got, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](`[
				agentpayUI.money("1234567.5", "USD"), agentpayUI.money("0.123456", "USDC"), agentpayUI.money("10"),
				agentpayUI.money("-5.1", "USDC"), agentpayUI.money("1000.000000", "USDC"), agentpayUI.money("007.5"),
				agentpayUI.sentence("conflict: session cs_1 is confirmed"), agentpayUI.sentence("to_address: must be an address on base"),
				agentpayUI.sentence("amount_usd: must be positive"), agentpayUI.sentence("Already a sentence."),
				agentpayUI.sentence("not found: conflict: no such refund"),
				agentpayUI.device("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36 Edg/124.0"),
				agentpayUI.device("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"),
				agentpayUI.device("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36"),
				agentpayUI.device("Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"),
				agentpayUI.device("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15"),
				agentpayUI.device(""), agentpayUI.device("curl/8.5.0")]`))
			require.NoError(t, err)
			require.Equal(t, []string{
				"1,234,567.50 USD", "0.123456 USDC", "10.00",
				"-5.10 USDC", "1,000.00 USDC", "7.50",
				"Session cs_1 is confirmed.", "The to address must be an address on base.",
				"The amount (USD) must be positive.", "Already a sentence.",
				"No such refund.",
				"Edge on Windows", "Safari on iOS", "Chrome on Android", "Firefox on Linux", "Safari on macOS",
				"Unknown browser", "curl/8.5.0",
			}, got)
		}
		require.NoError(t, chromedp.Do(tctx,
			chromedp.Navigate(origin+"/app/settings"),
			wait(`document.querySelectorAll("#sessions li").length > 0`),
		))
		look("settings")
		require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/merchants/new"), chromedp.WaitVisible(`#merchant-form`)))
		look("merchant-new")

		// The dashboard: a session created from it first (a row in the
		// sessions table), then every view.
		view := func(hash string) chromedp.Action[chromedp.Void] {
			name := strings.SplitN(hash, "/", 2)[0]
			return wait(`document.getElementById("dashboard").dataset.loaded === "` + name + `" && document.getElementById("dash-error").hidden`)
		}
		require.NoError(t, chromedp.Do(tctx,
			chromedp.Navigate(origin+"/app/dashboard#sessions"),
			view("sessions"),
			chromedp.SetValue(`#new-session-amount`, "123456.5"),
			chromedp.SetValue(`#new-session-description`, "A rather long description of what is bought, to wrap"),
			chromedp.Click(`#new-session`),
			view("session"),
		))
		// Part of it paid: the session's page says what is still due and
		// what the merchant can do (the service's SessionAttention).
		sessionID, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("session-id").textContent`))
		require.NoError(t, err)
		sess, err := env.DB.Ent.CheckoutSession.Query().Where(checkoutsession.ExternalID(sessionID)).Only(ctx)
		require.NoError(t, err)
		require.NoError(t, env.DB.Ent.CheckoutSession.UpdateOne(sess).SetStatus(checkoutsession.StatusDetecting).Exec(ctx))
		_, err = env.DB.Ent.Payment.Create().SetSessionID(sess.ID).SetExternalID("pay_pages_" + w.name).SetChain("base").
			SetTxHash("0x" + strings.Repeat("ab", 32)).SetLogIndex(int(w.width)).
			SetFromAddress("0x1111111111111111111111111111111111111111").SetToAddress("0x2222222222222222222222222222222222222222").
			SetAmountToken(100_000_000_000).SetAmountUsd(decimal.NewFromInt(100_000)).SetBlockNumber(1).
			SetStatus(payment.StatusConfirmed).Save(ctx)
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(tctx, chromedp.Reload(), view("session"),
			wait(`!document.getElementById("session-attention").hidden`)))
		attention, err := chromedp.Run(tctx, chromedp.Evaluate[string](
			`[...document.querySelectorAll("#session-attention .attention")].map(p => p.dataset.kind + ": " + p.textContent).join("\n")`))
		require.NoError(t, err)
		require.Equal(t, "underpaid: Part paid: 100,000.00 USD of 123,456.50 USD arrived and 23,456.50 USD is still due. "+
			"The customer can send the rest from the hosted page until the session expires; if they do not, what arrived is held for you to refund.", attention)
		look("dashboard-session")
		for _, hash := range []string{"overview", "sessions", "webhooks", "keys", "settings", "members"} {
			require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/dashboard#"+hash), view(hash)), hash)
			look("dashboard-" + hash)
		}
		require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(origin+"/app/dashboard#sessions"), view("sessions"),
			wait(`document.querySelectorAll("#sessions-table tbody tr").length >= 1`)))
		if w.width < 600 {
			// A phone: the table's rows are stacked, each cell led by its
			// column's name.
			shown, err := chromedp.Run(tctx, chromedp.Evaluate[string](
				`getComputedStyle(document.querySelector("#sessions-table td"), "::before").content + "|" + getComputedStyle(document.querySelector("#sessions-table tr")).display`))
			require.NoError(t, err)
			require.Equal(t, `"Session: "|block`, shown)
		}
		// A confirmation, open.
		require.NoError(t, chromedp.Do(tctx,
			chromedp.Navigate(origin+"/app/dashboard#keys"), view("keys"),
			chromedp.Click(`#roll-keys`),
			wait(`document.getElementById("confirm-dialog").open`),
		))
		look("dashboard-confirm-roll-keys")
		require.NoError(t, chromedp.Do(tctx,
			chromedp.Click(`#confirm-cancel`),
			wait(`!document.getElementById("confirm-dialog").open && document.getElementById("rolled-keys").hidden`),
		))
	}
}
