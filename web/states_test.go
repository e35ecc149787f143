package web_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

// screenshots keeps the state tests' PNGs in a directory (`go test ./web
// -run States -screenshots /tmp/shots`); by default they go to the test's
// temporary directory. They are looked at, not compared: a golden image
// breaks with every Chromium release (docs/testing.md).
var screenshots = flag.String("screenshots", "", "directory to keep the hosted page's state screenshots in")

// widths are the screenshot widths: a phone and a desktop.
var widths = []struct {
	name          string
	width, height int64
}{
	{"phone", 390, 844},
	{"desktop", 1280, 800},
}

// pageView is what a state test reads off the page.
type pageView struct {
	State       string            `json:"state"`
	Status      string            `json:"status"`
	ScrollWidth int               `json:"scrollWidth"`
	InnerWidth  int               `json:"innerWidth"`
	Visible     map[string]bool   `json:"visible"`
	Text        map[string]string `json:"text"`
	Message     string            `json:"message"`
	// BodyText is what a person reads on the page (innerText).
	BodyText string `json:"bodyText"`
	// TxHash and TxHref are the receipt's first transaction and its link.
	TxHash string            `json:"txHash"`
	TxHref string            `json:"txHref"`
	Bar    map[string]string `json:"bar"`
}

// readView reads the page: whether each part is displayed (it has a box),
// the texts of the views, and the widths that tell a horizontal overflow.
const readView = `(() => {
	const c = document.getElementById("checkout");
	const ids = ["choose", "pay", "qr", "wallet-link", "change-chain", "address", "expiry", "underpaid",
		"send-full", "send-rest", "progress", "done", "returning", "ended", "ended-expired", "ended-cancelled",
		"ended-paid", "return", "overpaid", "cancel", "rest-hint", "receipt"];
	const visible = {}, text = {};
	for (const id of ids) {
		const e = document.getElementById(id);
		visible[id] = !!e && e.getClientRects().length > 0;
		text[id] = e ? e.textContent.replace(/\s+/g, " ").trim() : "";
	}
	const bar = document.getElementById("confirm-bar");
	return {
		state: c.dataset.state, status: c.dataset.status,
		scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
		visible, text, message: document.getElementById("status-message").textContent, bodyText: document.body.innerText,
		txHash: (document.querySelector("#receipt .tx") || {}).textContent || "",
		txHref: (document.querySelector("#receipt a") || {}).href || "",
		bar: { max: bar.getAttribute("max") || "", value: bar.hasAttribute("value") ? String(bar.value) : "" },
	};
})()`

// shoot opens the page of sess in a new tab at each width, waits for
// state, writes a full-page screenshot and runs check on what it reads.
func shoot(t *testing.T, bctx context.Context, url, name, state string, check func(t *testing.T, v pageView)) {
	t.Helper()
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, w := range widths {
		t.Run(name+"/"+w.name, func(t *testing.T) {
			tab, cancel := chromedp.NewContext(bctx)
			defer cancel()
			ctx, cancelTimeout := context.WithTimeout(tab, time.Minute)
			defer cancelTimeout()
			require.NoError(t, chromedp.Do(ctx,
				chromedp.EmulateViewport(w.width, w.height),
				chromedp.Navigate(url),
				waitCheckout(`c.dataset.state === "`+state+`"`),
			))
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG (below it, JPEG)
			require.NoError(t, err)
			file := filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, w.name))
			require.NoError(t, os.WriteFile(file, png, 0o644))
			t.Logf("screenshot %s", file)
			v, err := chromedp.Run(ctx, chromedp.Evaluate[pageView](readView))
			require.NoError(t, err)
			require.Equal(t, state, v.State)
			require.LessOrEqual(t, v.ScrollWidth, v.InnerWidth, "nothing overflows horizontally at %d px", w.width)
			require.EqualValues(t, w.width, v.InnerWidth)
			testenv.CheckAccessibility(t, ctx, "the hosted page "+name+" at "+w.name+" width")
			check(t, v)
		})
	}
}

// assertReceipt: a confirmed page lists the payment, 15.25 USDC on Base,
// with its transaction linked to the explorer of the session's mode.
func assertReceipt(t *testing.T, v pageView, st *agentpay.CheckoutStatus) {
	t.Helper()
	require.True(t, v.Visible["receipt"], "the receipt shows")
	require.Contains(t, v.Text["receipt"], "Receipt 15.25 USDC on Base: view the transaction")
	require.Regexp(t, `^0x[0-9a-f]{64}$`, v.TxHash)
	require.Equal(t, agentpay.TransactionURL(agentpay.ModeTest, st.Chain, v.TxHash), v.TxHref)
	require.Equal(t, "https://sepolia.basescan.org/tx/"+v.TxHash, v.TxHref)
}

// assertNoStatusWords: a person reads sentences, never the API's status
// names (detecting, confirming, ...).
func assertNoStatusWords(t *testing.T, v pageView) {
	t.Helper()
	for _, w := range []string{"Status:", "pending", "detecting", "underpaid", "confirming"} {
		require.NotContains(t, v.BodyText, w)
	}
}

// assertGone: the parts a finished or paid session must not show.
func assertGone(t *testing.T, v pageView, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.False(t, v.Visible[id], "#%s is not displayed in state %s", id, v.State)
	}
}

// paymentParts are what lets a person pay: gone once paid or ended.
var paymentParts = []string{"qr", "wallet-link", "choose", "change-chain", "pay", "expiry", "cancel"}

// hidden reports whether the server-rendered page marks the element with
// id hidden (the first paint, before any script).
func hidden(t *testing.T, body, id string) bool {
	t.Helper()
	m := regexp.MustCompile(`<[a-z0-9]+ id="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(body)
	require.NotEmpty(t, m, "#%s in the page", id)
	return strings.Contains(m, " hidden>") || strings.Contains(m, " hidden ")
}

// TestCheckoutPageStates drives real sessions to each state the hosted page
// shows (an underpayment and an overpayment sent on the base devnet, blocks
// committed one at a time against three required confirmations, expiry by
// the expiry job on a stub clock, a cancel through the merchant API) and
// checks each: the server's first paint (no script), then in Chromium at
// phone and desktop widths, with a full-page screenshot of each. A page
// left open on the overpaid session follows it live from the deposit to
// the success view.
func TestCheckoutPageStates(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Second)
	h := newHarnessWith(t, testenv.Options{
		Chains:        []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 3},
		Clock:         start,
	})
	ctx := context.Background()
	name, email, site := "Acme Coffee", "shop@example.com", "https://shop.example"
	reg, err := h.svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email, Website: &site})
	require.NoError(t, err)
	m := reg.Merchant
	newSession := func(set ...func(*ent.CheckoutSessionCreate)) (*ent.CheckoutSession, common.Address) {
		t.Helper()
		sess := h.session(t, m, append([]func(*ent.CheckoutSessionCreate){func(c *ent.CheckoutSessionCreate) {
			c.SetExpiresAt(start.Add(30 * time.Minute))
		}}, set...)...)
		d, err := h.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
		require.NoError(t, err)
		return sess, common.HexToAddress(d.Address)
	}
	scan := func() {
		t.Helper()
		_, err := h.svc.ScanDeposits(ctx, agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
	}
	pay := func(to common.Address, usdc string) {
		t.Helper()
		_, err := h.evm.Send(ctx, to, decimal.RequireFromString(usdc).Shift(agentpay.USDCDecimals).BigInt())
		require.NoError(t, err)
	}
	status := func(sess *ent.CheckoutSession) *agentpay.CheckoutStatus {
		t.Helper()
		st, err := h.svc.CheckoutStatus(ctx, sess.ExternalID, "")
		require.NoError(t, err)
		return st
	}
	pageURL := func(sess *ent.CheckoutSession) string { return h.srv.URL + "/pay/" + sess.ExternalID }
	firstPaint := func(sess *ent.CheckoutSession) string {
		t.Helper()
		res := h.get(t, "/pay/"+sess.ExternalID)
		require.Equal(t, http.StatusOK, res.status, res.body)
		assertPageHygiene(t, res.body)
		return res.body
	}

	underpaid, underAddr := newSession()
	overpaid, overAddr := newSession()
	lapsed, lapsedAddr := newSession(func(c *ent.CheckoutSessionCreate) { c.SetExpiresAt(start.Add(time.Minute)) })
	cancelled := h.session(t, m)
	scan() // the watcher's cursor starts at the head, before the payments

	bctx := testenv.StartBrowser(t)
	// A page open on the overpaid session before it is paid follows it.
	live, cancelLive := chromedp.NewContext(bctx)
	defer cancelLive()
	live, cancelLiveTimeout := context.WithTimeout(live, 3*time.Minute)
	defer cancelLiveTimeout()
	require.NoError(t, chromedp.Do(live,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(pageURL(overpaid)),
		waitCheckout(`c.dataset.state === "detecting" && c.dataset.transport === "ws"`),
	))

	// Underpaid: 5.00 of 12.50 seen; 7.50 still due, to the same address.
	pay(underAddr, "5")
	pay(lapsedAddr, "1.25")
	scan()
	st := status(underpaid)
	require.Equal(t, "detecting", string(st.Status))
	require.Equal(t, "5", st.AmountPaid.String())
	require.Equal(t, agentpay.PageStateUnderpaid, st.Progress.State, "the service says underpaid")
	require.Equal(t, "7.5", st.Progress.Due.String(), "and what is still due")
	body := firstPaint(underpaid)
	require.Contains(t, body, `data-state="underpaid"`)
	require.Contains(t, body, `<span id="paid">5.00</span>`)
	require.Contains(t, body, `<span id="due">7.50</span>`)
	require.False(t, hidden(t, body, "underpaid"))
	require.False(t, hidden(t, body, "pay"))
	require.True(t, hidden(t, body, "qr"), "the QR code asks for the full amount")
	require.True(t, hidden(t, body, "wallet-link"), "the wallet link asks for the full amount")
	require.True(t, hidden(t, body, "done"))
	shoot(t, bctx, pageURL(underpaid), "underpaid", "underpaid", func(t *testing.T, v pageView) {
		require.True(t, v.Visible["underpaid"] && v.Visible["address"] && v.Visible["send-rest"] && v.Visible["expiry"])
		require.Equal(t, "Received 5.00 USDC of 12.50. Still due: 7.50 USDC", v.Text["underpaid"])
		require.Equal(t, "Send the remaining 7.50 USDC to the same address", v.Text["send-rest"])
		require.Equal(t, underAddr.Hex(), v.Text["address"])
		require.Equal(t, "Received 5.00 USDC; 7.50 USDC still due.", v.Message)
		assertNoStatusWords(t, v)
		assertGone(t, v, "qr", "wallet-link", "send-full", "choose", "change-chain", "overpaid", "progress", "done", "ended")
	})

	// Overpaid and confirming: 15.25 for 12.50, blocks one at a time.
	pay(overAddr, "15.25")
	scan()
	st = status(overpaid)
	require.Equal(t, "confirming", string(st.Status))
	require.NotNil(t, st.Required)
	require.EqualValues(t, 3, *st.Required)
	require.Less(t, st.Confirmations, uint64(3))
	for st.Confirmations < 2 {
		h.evm.Commit()
		scan()
		st = status(overpaid)
	}
	require.Equal(t, "confirming", string(st.Status))
	require.EqualValues(t, 2, st.Confirmations)
	require.NoError(t, chromedp.Do(live, waitCheckout(`c.dataset.state === "confirming" && document.getElementById("conf-n").textContent === "2"`)),
		"the open page shows the confirmations live")
	body = firstPaint(overpaid)
	require.Contains(t, body, `data-state="confirming"`)
	require.Contains(t, body, `<progress id="confirm-bar" max="3" value="2"`)
	require.Contains(t, body, `<span id="excess">2.75</span>`)
	require.False(t, hidden(t, body, "progress"))
	require.False(t, hidden(t, body, "overpaid"))
	require.True(t, hidden(t, body, "pay"))
	shoot(t, bctx, pageURL(overpaid), "confirming-overpaid", "confirming", func(t *testing.T, v pageView) {
		require.True(t, v.Visible["progress"] && v.Visible["overpaid"])
		require.Contains(t, v.Text["progress"], "Payment received 2 of 3 confirmations")
		require.Equal(t, map[string]string{"max": "3", "value": "2"}, v.Bar)
		require.Equal(t, "You sent 2.75 USDC more than the amount. Acme Coffee will handle the excess.", v.Text["overpaid"])
		require.Equal(t, "Payment received: 2 of 3 confirmations.", v.Message)
		assertGone(t, v, append(paymentParts, "underpaid", "done", "ended")...)
	})

	// Confirmed: the success view, nothing to pay with (no success_url
	// here, so the page stays; TestCheckoutPageBrowser follows the redirect).
	for st.Status != "confirmed" {
		h.evm.Commit()
		scan()
		st = status(overpaid)
	}
	require.NoError(t, chromedp.Do(live, waitCheckout(`c.dataset.state === "confirmed"`)), "the open page shows confirmed live")
	v, err := chromedp.Run(live, chromedp.Evaluate[pageView](readView))
	require.NoError(t, err)
	require.True(t, v.Visible["done"] && v.Visible["overpaid"])
	assertGone(t, v, append(paymentParts, "progress", "underpaid", "ended")...)
	// The receipt arrives live too: the transaction, linked to the chain's
	// explorer.
	require.NoError(t, chromedp.Do(live, waitCheckout(`!!document.querySelector("#receipt .tx")`)), "the receipt is loaded live")
	v, err = chromedp.Run(live, chromedp.Evaluate[pageView](readView))
	require.NoError(t, err)
	assertReceipt(t, v, st)
	body = firstPaint(overpaid)
	require.Contains(t, body, `data-state="confirmed"`)
	require.False(t, hidden(t, body, "done"))
	require.True(t, hidden(t, body, "pay"))
	require.True(t, hidden(t, body, "choose"))
	require.True(t, hidden(t, body, "progress"))
	shoot(t, bctx, pageURL(overpaid), "confirmed", "confirmed", func(t *testing.T, v pageView) {
		require.True(t, v.Visible["done"])
		require.Contains(t, v.Text["done"], "Payment confirmed")
		require.Contains(t, v.Text["done"], "Acme Coffee has received your payment of 12.50 USD.")
		assertReceipt(t, v, st)
		assertNoStatusWords(t, v)
		require.Equal(t, "You sent 2.75 USDC more than the amount. Acme Coffee will handle the excess.", v.Text["overpaid"])
		assertGone(t, v, append(paymentParts, "progress", "underpaid", "ended", "returning")...)
	})

	// Cancelled through the merchant API.
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/checkout/sessions/"+cancelled.ExternalID+"/cancel", nil)
	require.NoError(t, err)
	req.Header.Set(httpx.MerchantKeyHeader, reg.Keys.TestSecretKey)
	res, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	body = firstPaint(cancelled)
	require.Contains(t, body, `data-state="cancelled"`)
	require.False(t, hidden(t, body, "ended"))
	require.True(t, hidden(t, body, "expiry"), "no countdown")
	require.Contains(t, body, `<a id="return" class="return" href="https://shop.example/cart/42">Return to Acme Coffee</a>`)
	shoot(t, bctx, pageURL(cancelled), "cancelled", "cancelled", func(t *testing.T, v pageView) {
		require.True(t, v.Visible["ended"] && v.Visible["ended-cancelled"] && v.Visible["return"])
		require.Equal(t, "Return to Acme Coffee", v.Text["return"])
		assertGone(t, v, append(paymentParts, "ended-expired", "ended-paid", "done", "progress", "overpaid")...)
	})

	// Expired by the expiry job once the clock passes expires_at, with
	// 1.25 of 12.50 received.
	h.clock.Advance(2 * time.Minute)
	n, err := h.svc.ExpireSessions(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the session past its deadline")
	require.Equal(t, "expired", string(status(lapsed).Status))
	require.Equal(t, "detecting", string(status(underpaid).Status))
	body = firstPaint(lapsed)
	require.Contains(t, body, `data-state="expired"`)
	require.True(t, hidden(t, body, "pay"))
	require.True(t, hidden(t, body, "expiry"))
	shoot(t, bctx, pageURL(lapsed), "expired", "expired", func(t *testing.T, v pageView) {
		require.True(t, v.Visible["ended"] && v.Visible["ended-expired"] && v.Visible["return"] && v.Visible["ended-paid"])
		require.Equal(t, "1.25 USDC was received for this checkout; Acme Coffee handles it.", v.Text["ended-paid"])
		require.Equal(t, "This checkout has expired.", v.Message)
		assertGone(t, v, append(paymentParts, "ended-cancelled", "done", "progress", "overpaid", "underpaid")...)
	})
	// No countdown runs on an ended page: the countdown text stays what
	// the server wrote.
	tab, cancelTab := chromedp.NewContext(bctx)
	defer cancelTab()
	tab, cancelTabTimeout := context.WithTimeout(tab, time.Minute)
	defer cancelTabTimeout()
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(pageURL(lapsed)), waitCheckout(`c.dataset.state === "expired"`)))
	countdown, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("countdown").textContent`))
	require.NoError(t, err)
	require.Equal(t, lapsed.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), countdown)
}
