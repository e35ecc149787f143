package app

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/dashboardsession"
)

// TestDashboardWebhookURLKeepsAnEdit: the webhooks view reloads on every
// live event, and a URL written over the saved one and not saved yet
// survives it, so Save sends what was written; a field not written over
// follows the saved URL. Before, each reload put the saved URL back in
// the field (unless it had the focus), and Save then sent that: a new
// merchant's empty URL replaced the one just entered, "Saved." was shown
// and no delivery was ever made (TestDashboardEndToEnd failed so on a
// loaded machine: the view's first answer came after the URL was
// written).
func TestDashboardWebhookURLKeepsAnEdit(t *testing.T) {
	a := serveAppWith(t, appSetup{config: func(cfg *agentpay.Config, _ string) { cfg.AgentMode = agentpay.ModeTest }})
	env, svc, origin := a.env, a.svc, a.origin
	ctx := context.Background()

	// A new merchant (no webhook URL) and its owner, signed in.
	name, email := "Hooks Shop", "owner@hooks.test"
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	confirm := a.linkTo(t, email, "/confirm-email/")
	_, err = svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "hooks_owner"})
	require.NoError(t, err)
	_, err = svc.ConfirmMerchantEmail(ctx, confirm[strings.LastIndex(confirm, "/")+1:])
	require.NoError(t, err)
	require.NoError(t, svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 3*time.Minute)
	wait := pollFor
	field := func() string {
		t.Helper()
		v, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("webhook-url").value`))
		require.NoError(t, err)
		return v
	}
	// event records test-mode events of the merchant (no URL: no
	// delivery) until the open view reloads and lists them: a feed line
	// reloads it once the page's watch is on, which the page does not
	// show (it subscribes after the view's first answer).
	events := 0
	event := func() {
		t.Helper()
		for try := 1; ; try++ {
			require.NoError(t, env.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
				_, err := svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{MerchantID: reg.Merchant.ID, Type: agentpay.EventWebhookTest})
				return err
			}))
			events++
			err := chromedp.Do(tctx, chromedp.Poll[chromedp.Void](`document.querySelectorAll("#webhook-events li:not(.empty)").length === `+strconv.Itoa(events),
				chromedp.WithPollingTimeout(5*time.Second)))
			if err == nil {
				return
			}
			if try == 6 {
				shown, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("dash-error").textContent + " | " + document.getElementById("webhook-events").innerText`))
				t.Fatalf("the view never reloaded with the events recorded (%d): %v (it shows: %s)", events, err, shown)
			}
		}
	}

	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.linkTo(t, email, "/signin/")),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#dashboard`),
		chromedp.Navigate(origin+"/app/dashboard#webhooks"),
		wait(`document.getElementById("dashboard").dataset.loaded === "webhooks" && document.getElementById("mode-label").textContent === "Test mode"`),
	))
	require.Equal(t, "", field())
	// The views that started together shared one opening: one dashboard
	// session (before, each view refused for want of a token opened its
	// own).
	opened, err := env.DB.Ent.DashboardSession.Query().Where(dashboardsession.MerchantID(reg.Merchant.ID)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, opened, "dashboard sessions opened")
	// A kept token the service no longer takes (revoked, expired) is
	// replaced once, not once per query of the view that was refused.
	_, err = env.DB.Ent.DashboardSession.Update().Where(dashboardsession.MerchantID(reg.Merchant.ID)).SetRevokedAt(time.Now()).Save(ctx)
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Reload(),
		wait(`document.getElementById("dashboard").dataset.loaded === "webhooks" && document.body.dataset.live === "subscribed"`),
	))
	opened, err = env.DB.Ent.DashboardSession.Query().Where(dashboardsession.MerchantID(reg.Merchant.ID)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, opened, "dashboard sessions opened after the first was revoked")

	// A URL written in the field, the focus elsewhere, then a live event.
	const first, second = "https://hooks.example.com/first", "https://hooks.example.com/second"
	require.NoError(t, chromedp.Do(tctx, chromedp.SetValue(`#webhook-url`, first)))
	event()
	require.Equal(t, first, field(), "the reload kept the unsaved URL")
	event()
	require.Equal(t, first, field())

	// Save sends it.
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("save-webhook").click()`),
		wait(`document.getElementById("dash-notice").textContent === "Saved."`),
	))
	m, err := env.DB.Ent.Merchant.Get(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.Equal(t, first, m.TestWebhookURL)

	// Saved, the field follows the service: a change made elsewhere (the
	// API, another member) shows at the next reload.
	auth, err := svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	url := second
	_, err = svc.UpdateMerchant(ctx, auth, agentpay.MerchantInput{WebhookURL: &url})
	require.NoError(t, err)
	event()
	require.NoError(t, chromedp.Do(tctx, wait(`document.getElementById("webhook-url").value === "`+second+`"`)))

	// An empty URL removes the endpoint, and the notice says what that
	// means rather than a bare "Saved.".
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("webhook-url").value = ""; document.getElementById("save-webhook").click()`),
		wait(`document.getElementById("dash-notice").textContent.startsWith("Saved. With no endpoint")`),
	))
	m, err = env.DB.Ent.Merchant.Get(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.Equal(t, "", m.TestWebhookURL)
}
