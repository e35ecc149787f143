package app

import (
	"context"
	"strconv"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"agentpay"
)

// loadProbe is run in the home page before its scripts (a DevTools
// script, outside the page's CSP): it counts the home's reads of the
// viewer (the GraphQL query naming pairings) in flight at once, can hold
// the answer of the next one until released, counts the live feed's
// messages, and can hold the page's subscribe message (holdSubscribe)
// until sendSubscribe: the page then believes itself subscribed while the
// service has not started its watch yet.
const loadProbe = `(function () {
  var t = window.__loads = {inflight: 0, max: 0, hold: false, held: false, arrived: false, nexts: 0, subscribed: false, release: function () {},
    holdSubscribe: false, sendSubscribe: function () {}};
  var realFetch = window.fetch;
  window.fetch = function (url, init) {
    if (!(init && typeof init.body === "string" && init.body.indexOf("pairings {") >= 0)) { return realFetch.apply(this, arguments); }
    t.inflight++;
    t.max = Math.max(t.max, t.inflight);
    var p = realFetch.apply(this, arguments);
    if (t.hold && !t.held) {
      t.held = true;
      var gate = new Promise(function (open) { t.release = open; });
      p = p.then(function (resp) { t.arrived = true; return gate.then(function () { return resp; }); });
    }
    return p.then(function (resp) { t.inflight--; return resp; }, function (e) { t.inflight--; throw e; });
  };
  var RealWS = window.WebSocket;
  window.WebSocket = function (url, protocols) {
    var ws = new RealWS(url, protocols), send = ws.send;
    ws.send = function (m) {
      if (String(m).indexOf('"subscribe"') >= 0) {
        t.subscribed = true;
        if (t.holdSubscribe) { t.sendSubscribe = function () { send.call(ws, m); }; return; }
      }
      return send.apply(ws, arguments);
    };
    ws.addEventListener("message", function (m) { if (JSON.parse(m.data).type === "next") { t.nexts++; } });
    return ws;
  };
  window.WebSocket.prototype = RealWS.prototype;
})();`

// TestHomeRendersOneLoadAtATime: a live event that arrives while the home
// is still reading after an action does not start a second read beside
// it (the two could answer in the other order and the older answer,
// rendered last, stay on screen); it reads again once the first is done,
// so the newest state shows. The first read's answer is held in the page
// until the event has arrived, which makes the overlap certain.
func TestHomeRendersOneLoadAtATime(t *testing.T) {
	a := serveApp(t)
	ctx := context.Background()
	email := "one.load@example.com"
	u, err := a.svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "one_load"})
	require.NoError(t, err)
	first, err := a.svc.QuickRegister(ctx, "one_load_first")
	require.NoError(t, err)
	second, err := a.svc.QuickRegister(ctx, "one_load_second")
	require.NoError(t, err)
	_, err = a.svc.RequestPairing(ctx, first.Agent, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	require.NoError(t, a.svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 2*time.Minute)
	wait := pollFor
	_, err = chromedp.Call(tctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: loadProbe})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#requests li.request`),
		wait(`window.__loads.subscribed && window.__loads.inflight === 0`),
	))

	// Deny the first request: its reload's answer is held in the page.
	nexts, err := chromedp.Run(tctx, chromedp.Evaluate[int](`window.__loads.hold = true; window.__loads.nexts`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx,
		clickJS(`#requests li.request button[data-decision=DENY]`),
		wait(`window.__loads.arrived`),
	))
	// The second agent asks meanwhile: its event arrives during the read.
	_, err = a.svc.RequestPairing(ctx, second.Agent, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx, wait(`window.__loads.nexts > `+strconv.Itoa(nexts))))
	_, err = chromedp.Run(tctx, chromedp.Evaluate[chromedp.Void](`window.__loads.release()`))
	require.NoError(t, err)

	// The newest state shows: the second request, not the first.
	require.NoError(t, chromedp.Do(tctx, wait(`window.__loads.inflight === 0 && (lis => lis.length === 1 && lis[0].textContent.startsWith("one_load_second"))(document.querySelectorAll("#requests li.request"))`)))
	most, err := chromedp.Run(tctx, chromedp.Evaluate[int](`window.__loads.max`))
	require.NoError(t, err)
	require.Equal(t, 1, most, "one read of the viewer at a time")
	denied, err := chromedp.Run(tctx, chromedp.Text(`#pairing-result`))
	require.NoError(t, err)
	require.Equal(t, "Denied one_load_first's request to pair.", denied)
}

// TestHomeMissesNoEventBeforeItsWatchStarts: the service starts a
// subscription's watch after the subscribe message, on its own goroutine,
// so an event committed after the page read its state but before the
// watch began was never sent, and the page missed it (tests slept 500 ms
// to be safe). The home subscribes after the last event it read: here its
// subscribe message is held in the page while a pairing request is
// committed, and the request still shows once the message goes.
func TestHomeMissesNoEventBeforeItsWatchStarts(t *testing.T) {
	a := serveApp(t)
	ctx := context.Background()
	email := "no.miss@example.com"
	u, err := a.svc.CreateUser(ctx, agentpay.NewUser{Email: email, Username: "no_miss"})
	require.NoError(t, err)
	reg, err := a.svc.QuickRegister(ctx, "no_miss_agent")
	require.NoError(t, err)
	require.NoError(t, a.svc.RequestSignIn(ctx, email, "192.0.2.1"))

	tctx := openBrowser(t, 2*time.Minute)
	wait := pollFor
	_, err = chromedp.Call(tctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: loadProbe + `window.__loads.holdSubscribe = true;`})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(a.newestLink(t, email)),
		chromedp.Click(`#continue`),
		chromedp.WaitVisible(`#requests-empty`),
		wait(`document.body.dataset.live === "subscribed" && window.__loads.subscribed && window.__loads.inflight === 0`),
	))
	_, err = a.svc.RequestPairing(ctx, reg.Agent, agentpay.PairingRequest{UserID: u.ID.String()})
	require.NoError(t, err)
	_, err = chromedp.Run(tctx, chromedp.Evaluate[chromedp.Void](`window.__loads.sendSubscribe()`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tctx, wait(`document.querySelectorAll("#requests li.request").length === 1`)),
		"the request committed before the watch started shows")
}
