package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay/internal/store"
	"agentpay/internal/testdb/freshdb"
	"agentpay/internal/testenv"
)

// TestDashboardEndToEnd runs `agentpay dev` and takes a merchant's owner
// through the merchant dashboard in headless Chromium, as issue 14 tells
// it: the person whose address is the merchant's contact e-mail signs in
// with the link read from /dev/mail and opens the dashboard in test mode;
// sets the test webhook endpoint to a loopback receiver that answers 500;
// creates a session from the dashboard, pays it through /dev/faucet and
// watches it confirm on the open page; sees the failing delivery's tries,
// fixes the receiver, clicks redeliver and sees the successful try.
func TestDashboardEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five devnets and Chromium")
	}
	// The dev process's database, named here so a failure can show what
	// it holds.
	dataDir := t.TempDir()
	dbURL := "file:" + filepath.Join(dataDir, "agentpay.db")
	env := map[string]string{"WEBHOOK_RETRY_DELAYS": "1s", "DATA_DIR": dataDir}
	if freshdb.IsPostgres() {
		dbURL = freshdb.URL(t)
		env["DATABASE_URL"] = dbURL
	}
	base := startAppDev(t, env)

	// The merchant's webhook receiver: 500 until fixed.
	var fixed atomic.Bool
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fixed.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(receiver.Close)

	require.Equal(t, http.StatusCreated, postJSON(t, base+"/checkout/merchants/register",
		`{"name": "Dash Shop", "email": "owner@dash.test"}`, &map[string]any{}))

	bctx := testenv.StartBrowser(t)
	tab, cancelTab := chromedp.NewContext(bctx)
	testenv.RefuseCSPViolations(t, tab)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(tab, 4*time.Minute)
	defer cancel()

	// The contact e-mail is confirmed from the link mailed to it (until
	// then no account owns the merchant); then its holder signs in with
	// the app's e-mailed link (a new account: a username).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(caughtLinkTo(t, base, "owner@dash.test", "/confirm-email/")),
		chromedp.WaitVisible(`#confirm`),
		clickJS(`#confirm`),
		chromedp.WaitVisible(`#confirmed`),
	), "confirm the contact e-mail")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/app/signin"),
		chromedp.WaitVisible(`input[name="email"]`),
		chromedp.SendKeys(`input[name="email"]`, "owner@dash.test"),
		clickJS(`form[action$="/signin"] button[type=submit]`),
		waitJS(`document.readyState === "complete" && !document.querySelector('input[name="email"]')`),
	), "ask for a sign-in link")
	link := caughtLinkTo(t, base, "owner@dash.test", "/signin/")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(`input[name="username"]`),
		chromedp.SendKeys(`input[name="username"]`, "dash_owner"),
		clickJS(`#continue`),
		// Only a merchant (no agent): signed in, they land on the dashboard.
		waitJS(`document.readyState === "complete" && !!document.getElementById("dashboard")`),
	), "sign in")

	// The dashboard, in test mode, as the owner.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/app/dashboard#webhooks"),
		waitJS(`document.getElementById("merchant-picker").options.length === 1`),
		waitJS(`document.getElementById("mode-label").textContent === "Test mode" && document.getElementById("mode-switch").checked`),
		waitJS(`document.getElementById("role-label").textContent === "owner"`),
		waitJS(`!document.getElementById("view-webhooks").hidden`),
		chromedp.SetValue(`#webhook-url`, receiver.URL+"/hooks"),
		clickJS(`#save-webhook`),
		waitJS(`document.getElementById("dash-notice").textContent === "Saved."`),
		// What was saved is the URL written: the view's reloads (its first
		// answer, live events) once put the saved, empty, URL back in the
		// field before the click, and Save cleared the endpoint.
		waitJS(`document.getElementById("webhook-url").value === `+strconv.Quote(receiver.URL+"/hooks")),
	), "set the test webhook endpoint: %s", pageState(ctx))

	// A session created from the dashboard, paid through the faucet.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/app/dashboard#sessions"),
		waitJS(`!document.getElementById("view-sessions").hidden`),
		chromedp.SetValue(`#new-session-amount`, "10.00"),
		clickJS(`#new-session`),
		waitJS(`!document.getElementById("view-session").hidden && document.getElementById("session-status-value").textContent === "pending"`),
	), "create a session: %s", pageState(ctx))
	externalId, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("session-id").textContent`))
	require.NoError(t, err)
	var sel struct {
		Address string `json:"address"`
	}
	require.Equal(t, http.StatusOK, doJSON(t, http.MethodPost, base+"/checkout/pay/"+externalId+"/select", "",
		`{"chain": "base", "token": "USDC"}`, &sel))
	faucet(t, base, "base", sel.Address, "10")
	require.NoError(t, chromedp.Do(ctx,
		waitJS(`document.getElementById("session-status-value").textContent === "confirmed"`),
		waitJS(`[...document.querySelectorAll("#session-payments li")].some(li => li.dataset.status === "confirmed")`),
	), "the session confirms on the open page: %s", pageState(ctx))

	// The receiver answered 500 to every try of payment.confirmed's delivery.
	confirmed := `[...document.querySelectorAll("#session-events li")].find(li => li.textContent.includes("payment.confirmed"))`
	if err := chromedp.Do(ctx,
		waitJS(confirmed+` && `+confirmed+`.querySelectorAll(".attempt-failed").length >= 2 && `+confirmed+`.textContent.includes("HTTP 500")`),
		waitJS(confirmed+`.querySelector(".delivery-failed")`),
	); err != nil {
		t.Fatalf("the failing delivery's tries: %v\npage: %s\n%s", err, pageState(ctx), webhookState(dbURL))
	}

	fixed.Store(true)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](confirmed+`.querySelector("button.redeliver").click()`),
		waitJS(confirmed+` && `+confirmed+`.querySelector(".delivery-succeeded .attempt-ok")`),
		waitJS(confirmed+`.textContent.includes("HTTP 200")`),
	), "redeliver once the receiver is fixed: %s", pageState(ctx))

	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](confirmed+`.querySelectorAll(".delivery").length`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 2, "the first series and the redelivery")

	// Refunds from the session's page (issue 27 item 3): 4 of the 10 USD
	// first, after a confirmation saying what happens, then all that is
	// left with the amount empty; each shows with its state, and a payment
	// refunded in full offers no more.
	refundForm := `document.querySelector("#session-payments li.payment form.refund-form")`
	refundRows := `document.querySelectorAll("#session-refunds li.refund-row")`
	require.NoError(t, chromedp.Do(ctx,
		waitJS(refundForm+` && `+refundForm+`.querySelector("input").placeholder === "10"`),
		chromedp.SetValue(`#session-payments form.refund-form input`, "4"),
		clickJS(`#session-payments form.refund-form button[type=submit]`),
		waitJS(`document.getElementById("confirm-dialog").open && document.getElementById("confirm-text").textContent.includes("This sends 4.00 USD back to the payer's address on base")`),
		clickJS(`#confirm-ok`),
		waitJS(refundRows+`.length === 1 && `+refundRows+`[0].textContent.includes("4.00 USD")`),
		waitJS(refundForm+` && `+refundForm+`.querySelector("input").placeholder === "6"`),
		clickJS(`#session-payments form.refund-form button[type=submit]`),
		waitJS(`document.getElementById("confirm-dialog").open && document.getElementById("confirm-text").textContent.includes("6.00 USD (all that is left of it)")`),
		clickJS(`#confirm-ok`),
		waitJS(refundRows+`.length === 2 && `+refundRows+`[1].textContent.includes("6.00 USD")`),
		waitJS(`!`+refundForm),
		waitJS(`[...`+refundRows+`].every(li => li.dataset.status !== "failed")`),
		// What the person was told stays while the view refreshes (the
		// action's own reload, the live feed's): issue 27 item 9.
		waitJS(`!document.getElementById("dash-notice").hidden && /^Refund re_\S+ requested: it shows below with its state\.$/.test(document.getElementById("dash-notice").textContent)`),
	), "refund in part, then the rest: %s", pageState(ctx))

	// A session nobody paid is cancelled from its page, after a
	// confirmation; a paid one offers no cancel.
	require.NoError(t, chromedp.Do(ctx,
		waitJS(`document.getElementById("cancel-session").hidden`),
		chromedp.Navigate(base+"/app/dashboard#sessions"),
		waitJS(`!document.getElementById("view-sessions").hidden`),
		chromedp.SetValue(`#new-session-amount`, "3.00"),
		clickJS(`#new-session`),
		waitJS(`!document.getElementById("view-session").hidden && document.getElementById("session-status-value").textContent === "pending"`),
		waitJS(`!document.getElementById("cancel-session").hidden`),
		clickJS(`#cancel-session`),
		waitJS(`document.getElementById("confirm-dialog").open && document.getElementById("confirm-text").textContent.includes("stops taking payments")`),
		clickJS(`#confirm-ok`),
		waitJS(`document.getElementById("session-status-value").textContent === "cancelled" && document.getElementById("cancel-session").hidden`),
		waitJS(`!document.getElementById("dash-notice").hidden && document.getElementById("dash-notice").textContent === "The session was cancelled."`),
	), "cancel an open session: %s", pageState(ctx))

	// The sessions page finds it by its external id and status, and not
	// among the sessions created from tomorrow on.
	rows := `document.querySelectorAll("#sessions-table tbody tr")`
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/app/dashboard#sessions"),
		waitJS(`!document.getElementById("view-sessions").hidden`),
		chromedp.SetValue(`#session-search`, externalId),
		chromedp.SetValue(`#session-status`, "confirmed"),
		clickJS(`#session-filter-form button[type=submit]`),
		waitJS(rows+`.length === 1 && `+rows+`[0].dataset.id === "`+externalId+`"`),
		chromedp.SetValue(`#session-from`, tomorrow),
		clickJS(`#session-filter-form button[type=submit]`),
		waitJS(rows+`.length === 0`),
	), "filter the sessions: %s", pageState(ctx))

	// The other pages: the overview counts the payment, keys roll (shown
	// once), the brand preview follows the color picked.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/app/dashboard#overview"),
		waitJS(`[...document.querySelectorAll("#volume-table tbody tr")].some(tr => tr.textContent.includes("confirmed") && tr.textContent.includes("10"))`),
		waitJS(`[...document.querySelectorAll("#volume-chart rect")].some(r => Number(r.getAttribute("height")) > 0 && r.dataset.chain === "base")`),
		waitJS(`[...document.querySelectorAll("#volume-chart rect title")].some(t => t.textContent.endsWith("base: 10 USDC"))`),
		// The chart counts payments too, by status: one confirmed, none failed.
		chromedp.SetValue(`#chart-metric`, "count"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("chart-metric").dispatchEvent(new Event("change"))`),
		waitJS(`[...document.querySelectorAll("#volume-chart rect title")].some(t => t.textContent.endsWith("base: 1 payment"))`),
		chromedp.SetValue(`#chart-status`, "failed"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("chart-status").dispatchEvent(new Event("change"))`),
		waitJS(`document.querySelectorAll("#volume-chart rect").length === 0`),
		chromedp.Navigate(base+"/app/dashboard#keys"),
		waitJS(`document.getElementById("public-test").textContent.startsWith("pk_test_")`),
		clickJS(`#roll-keys`),
		waitJS(`document.getElementById("confirm-dialog").open && document.getElementById("confirm-text").textContent.includes("your test integration stops working until you use the new secret key")`),
		clickJS(`#confirm-ok`),
		waitJS(`document.getElementById("rolled-keys").textContent.includes("sk_test_")`),
		// Test mode has no settings form (it could only fail there): a
		// note links to live mode, where the form is.
		chromedp.Navigate(base+"/app/dashboard#settings"),
		waitJS(`!document.getElementById("settings-live-only").hidden && document.getElementById("settings-form").hidden`),
		clickJS(`#settings-go-live`),
		waitJS(`!document.getElementById("mode-switch").checked && !document.getElementById("settings-form").hidden`),
		waitJS(`document.getElementById("preview-name").textContent === "Dash Shop"`),
		// The form shows the merchant's settings as the API spells them.
		waitJS(`document.getElementById("set-settlement-type").value === "CRYPTO_USDC"`),
		chromedp.Evaluate[chromedp.Void](`(() => { const c = document.getElementById("set-brand-color"); c.value = "#ff0000"; c.dispatchEvent(new Event("input")); })()`),
		waitJS(`document.getElementById("brand-preview").style.getPropertyValue("--brand") === "#ff0000"`),
		// Pure red takes black text (5.25:1; white would be 4.00:1), as the
		// hosted page will draw it (agentpay.BrandColorsFor).
		waitJS(`document.getElementById("brand-preview").style.getPropertyValue("--on-brand") === "#000000"`),
		waitJS(`getComputedStyle(document.getElementById("preview-button")).color === "rgb(0, 0, 0)"`),
		waitJS(`document.getElementById("brand-note").textContent.startsWith("Text on it is black (contrast 5.25:1)")`),
		waitJS(`document.getElementById("dash-error").hidden`),
	), "overview, keys, settings: %s", pageState(ctx))

	// The owner invites a read-only member, who signs in in another
	// browser and sees the merchant without a control that changes it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/app/dashboard?mode=test#members"),
		waitJS(`!document.getElementById("view-members").hidden && document.querySelectorAll("#members li").length === 1`),
		chromedp.SetValue(`#invite-email`, "reader@dash.test"),
		chromedp.SetValue(`#invite-role`, "READ_ONLY"),
		clickJS(`#invite-form button[type=submit]`),
		waitJS(`document.querySelectorAll("#members li").length === 2`),
	), "invite a read-only member: %s", pageState(ctx))
	rtab, cancelReader := chromedp.NewContext(testenv.StartBrowser(t))
	testenv.RefuseCSPViolations(t, rtab)
	defer cancelReader()
	rctx, cancel := context.WithTimeout(rtab, 2*time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(rctx,
		chromedp.Navigate(base+"/app/signin"),
		chromedp.WaitVisible(`input[name="email"]`),
		chromedp.SendKeys(`input[name="email"]`, "reader@dash.test"),
		clickJS(`form[action$="/signin"] button[type=submit]`),
		waitJS(`document.readyState === "complete" && !document.querySelector('input[name="email"]')`),
	), "the member asks for a sign-in link")
	require.NoError(t, chromedp.Do(rctx,
		chromedp.Navigate(caughtLinkTo(t, base, "reader@dash.test", "/signin/")),
		chromedp.WaitVisible(`input[name="username"]`),
		chromedp.SendKeys(`input[name="username"]`, "dash_reader"),
		clickJS(`#continue`),
		waitJS(`document.readyState === "complete" && !!document.getElementById("dashboard")`),
		chromedp.Navigate(base+"/app/dashboard#session/"+externalId),
		waitJS(`document.getElementById("role-label").textContent === "read-only"`),
		waitJS(`document.getElementById("session-status-value").textContent === "confirmed"`),
		waitJS(`document.querySelectorAll("button.redeliver").length > 0 && [...document.querySelectorAll("button.redeliver")].every(b => b.offsetParent === null)`),
		waitJS(`getComputedStyle(document.getElementById("new-session-form")).display === "none"`),
	), "the read-only member's dashboard: %s", pageState(rctx))
}

// caughtLinkTo waits for a mail to address carrying a link whose path
// holds part, and answers that link.
func caughtLinkTo(t *testing.T, base, address, part string) string {
	t.Helper()
	var link string
	require.Eventually(t, func() bool {
		var inbox struct{ Messages []struct{ Links []string } }
		getJSON(t, base+"/dev/mail?to="+url.QueryEscape(address), &inbox)
		for _, m := range inbox.Messages {
			for _, l := range m.Links {
				if strings.Contains(l, part) {
					link = l
					return true
				}
			}
		}
		return false
	}, processTestTimeout, 100*time.Millisecond, "no mail to %s with a %s link", address, part)
	return link
}

// pageState is what the dashboard shows when a step fails: where it is,
// its error and the view's text.
func pageState(ctx context.Context) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + " | error: " + document.getElementById("dash-error").textContent + " | " +
		[...document.querySelectorAll(".view")].filter(v => !v.hidden).map(v => v.innerText).join(" / ")`))
	return s
}

// webhookState is what the dev process's database holds of the webhooks
// (a failure's dump): the merchant's test endpoint, the deliveries with
// their tries, and the deliver_webhook jobs with their state and when
// they are due.
func webhookState(dbURL string) string {
	db, err := store.OpenDB(context.Background(), store.DBConfig{URL: dbURL})
	if err != nil {
		return "opening the dev database: " + err.Error()
	}
	defer db.Close()
	var b strings.Builder
	for _, q := range []string{
		"SELECT id, test_webhook_url, updated_at FROM merchants",
		"SELECT e.event_type, d.id, d.url, d.status, d.attempts, d.next_attempt_at FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id ORDER BY d.created_at",
		"SELECT id, state, attempt, scheduled_at, errors FROM river_job WHERE kind = 'deliver_webhook' ORDER BY id",
	} {
		fmt.Fprintf(&b, "%s:\n%s", q, queryRows(db.SQL, q))
	}
	return b.String()
}

// queryRows answers a query's rows as text, a line each.
func queryRows(db *sql.DB, q string) string {
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		return err.Error() + "\n"
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return b.String() + err.Error() + "\n"
		}
		for i, v := range vals {
			if s, ok := v.([]byte); ok {
				v = string(s)
			}
			text := fmt.Sprint(v)
			if len(text) > 300 { // a job's errors
				text = text[:300] + "…"
			}
			fmt.Fprintf(&b, "%s=%s ", cols[i], text)
		}
		b.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		b.WriteString(err.Error() + "\n")
	}
	return b.String()
}
