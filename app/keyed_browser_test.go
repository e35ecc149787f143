package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
)

// keptNode marks the element sel names (its first match) in the page,
// with its place in its list and on the page, and puts the focus on the
// control focus names inside it (its height is taken on the document,
// after the focus scrolled it into view); keptStill then says whether a re-render
// left that very node connected, at the same index, at the same height,
// still focused.
func keptNode(sel, focus string) string {
	return `(e => {
  e.querySelector(` + strconv.Quote(focus) + `).focus();
  window.__kept = {node: e, index: Array.prototype.indexOf.call(e.parentNode.children, e), top: e.getBoundingClientRect().top + window.scrollY};
  return e.firstChild.textContent;
})(document.querySelector(` + strconv.Quote(sel) + `))`
}

const keptStill = `(k => [k.node.isConnected, !!k.node.parentNode && Array.prototype.indexOf.call(k.node.parentNode.children, k.node) === k.index,
  k.node.getBoundingClientRect().top + window.scrollY === k.top, k.node.contains(document.activeElement)].join(" "))(window.__kept)`

// TestHomeKeepsUnchangedListItems: the home re-renders its lists on every
// live event, and an item the event did not change keeps its node (the
// same element, in the same place, with the focus on its button), so the
// page does not move under a person's pointer. Two paired agents; the
// second revokes its pairing while the first's Revoke button has the
// focus.
func TestHomeKeepsUnchangedListItems(t *testing.T) {
	a := serveApp(t)
	ctx := context.Background()
	email := "kept.items@example.com"
	u, err := a.svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "kept_items"})
	require.NoError(t, err)
	agents, pairings := map[string]*ent.Agent{}, map[string]string{}
	for _, name := range []string{"kept_first", "kept_second"} {
		reg, err := a.svc.QuickRegister(ctx, name)
		require.NoError(t, err)
		p, err := a.svc.RequestPairing(ctx, reg.Agent, agentpay.PairingRequest{UserID: u.ID.String()})
		require.NoError(t, err)
		_, err = a.svc.DecidePairing(ctx, u, p.Pairing.ID.String(), agentpay.ApprovePairing)
		require.NoError(t, err)
		agents[name], pairings[name] = reg.Agent, p.Pairing.ID.String()
	}
	require.NoError(t, a.svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 2*time.Minute)
	wait := pollFor
	_, err = chromedp.Call(tctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: loadProbe})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#paired li`),
		wait(`document.querySelectorAll("#paired li").length === 2 && document.body.dataset.live === "subscribed" && window.__loads.inflight === 0`),
	))
	first, err := chromedp.Run(tctx, chromedp.Evaluate[string](keptNode(`#paired li`, `button`)))
	require.NoError(t, err)
	other := "kept_second"
	if first == other {
		other = "kept_first"
	}
	nexts, err := chromedp.Run(tctx, chromedp.Evaluate[int](`window.__loads.nexts`))
	require.NoError(t, err)
	_, err = a.svc.RevokeAgentPairing(ctx, agents[other], pairings[other])
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx, wait(`window.__loads.nexts > `+strconv.Itoa(nexts)+` && document.querySelectorAll("#paired li").length === 1`)))
	still, err := chromedp.Run(tctx, chromedp.Evaluate[string](keptStill))
	require.NoError(t, err)
	require.Equal(t, "true true true true", still, "%s's item: connected, same index, same height, focused", first)
}

// TestDashboardKeepsUnchangedRows: the dashboard refreshes the view shown
// on every event of the merchant's live feed, and a row the event did not
// change keeps its node. Two sessions listed; a test webhook event (which
// changes no session) arrives while a session's link has the focus.
func TestDashboardKeepsUnchangedRows(t *testing.T) {
	a := serveApp(t)
	ctx := context.Background()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(receiver.Close)
	name, email := "Kept Rows Shop", "owner@kept-rows.test"
	reg, err := a.svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	confirm := a.newestLink(t, email)
	_, err = a.svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "kept_rows_owner"})
	require.NoError(t, err)
	_, err = a.svc.ConfirmMerchantEmail(ctx, confirm[strings.LastIndex(confirm, "/")+1:])
	require.NoError(t, err)
	auth, err := a.svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	hook := receiver.URL + "/hooks"
	_, err = a.svc.UpdateMerchant(ctx, auth, agentpay.MerchantInput{WebhookURL: &hook})
	require.NoError(t, err)
	auth, err = a.svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)
	for _, amount := range []string{"3", "4"} {
		d := decimal.RequireFromString(amount)
		_, err := a.svc.CreateSession(ctx, auth, agentpay.SessionInput{Amount: &d, Currency: "USD"})
		require.NoError(t, err)
	}
	require.NoError(t, a.svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 2*time.Minute)
	wait := pollFor
	_, err = chromedp.Call(tctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: loadProbe})
	require.NoError(t, err)
	loaded := `document.getElementById("dashboard").dataset.loaded === "sessions" && !document.getElementById("dashboard").hasAttribute("aria-busy")`
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#app, #dashboard`),
	))
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.origin+"/app/dashboard#sessions"),
		wait(loaded+` && document.querySelectorAll("#sessions-table tbody tr").length === 2 && document.body.dataset.live === "subscribed"`),
	))
	_, err = chromedp.Run(tctx, chromedp.Evaluate[string](keptNode(`#sessions-table tbody tr`, `a`)))
	require.NoError(t, err)
	nexts, err := chromedp.Run(tctx, chromedp.Evaluate[int](`window.__loads.nexts`))
	require.NoError(t, err)
	_, err = a.svc.SendTestWebhook(ctx, auth)
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx, wait(`window.__loads.nexts > `+strconv.Itoa(nexts)+` && `+loaded)))
	still, err := chromedp.Run(tctx, chromedp.Evaluate[string](keptStill))
	require.NoError(t, err)
	require.Equal(t, "true true true true", still, "the first session's row: connected, same index, same height, focused")
}

// TestConfirmReopenedAtOnce: a confirmation asked again right after the
// last was answered stays open. Closing a dialog queues its close event;
// when the next confirmation opened before that event ran (a person, or
// a test, quick to submit again on a loaded machine), the stale event
// answered the new one "no" and closed it (CI on PostgreSQL:
// TestWithdrawFormInBrowser never saw the second confirmation).
func TestConfirmReopenedAtOnce(t *testing.T) {
	a := serveApp(t)
	ctx := context.Background()
	email := "confirm.again@example.com"
	_, err := a.svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "confirm_again"})
	require.NoError(t, err)
	require.NoError(t, a.svc.RequestSignIn(ctx, email, "192.0.2.1"))
	tctx := openBrowser(t, time.Minute)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#withdraw-form`),
	))
	// Go back on the first, then ask again before the first's close event
	// has run (only microtasks in between), then let it run.
	got, err := chromedp.Run(tctx, chromedp.Evaluate[string](`(async () => {
  const first = agentpayUI.confirm("First?", "The first.", "Do it");
  document.getElementById("confirm-cancel").click();
  const answer = await first;
  const second = agentpayUI.confirm("Second?", "The second.", "Do it");
  await new Promise(r => setTimeout(r, 200));
  const open = document.getElementById("confirm-dialog").open;
  document.getElementById("confirm-ok").click();
  return [answer, open, await second].join(" ");
})()`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, "false true true", got, "the first answered no; the second stays open and is answered yes")
	// Escape still answers no.
	_, err = chromedp.Run(tctx, chromedp.Evaluate[chromedp.Void](`window.__third = agentpayUI.confirm("Third?", "The third.", "Do it")`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx, chromedp.KeyEvent(kb.Escape)))
	got, err = chromedp.Run(tctx, chromedp.Evaluate[string](`window.__third.then(a => a + " " + document.getElementById("confirm-dialog").open)`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, "false false", got)
}
