package web_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testenv"
	"agentpay/rest"
	"agentpay/web"
)

const brandColor = "#0a7cff"

func (h *harness) merchant(t *testing.T) *ent.Merchant {
	t.Helper()
	name, email, color := "Acme Coffee", "shop@example.com", brandColor
	site, success := "https://shop.example", "https://shop.example/thanks"
	reg, err := h.svc.RegisterMerchant(context.Background(), agentpay.MerchantInput{
		Name: &name, Email: &email, BrandColor: &color, Website: &site, SuccessURL: &success,
	})
	require.NoError(t, err)
	return reg.Merchant
}

// session inserts a test-mode session of 12.50 USD.
func (h *harness) session(t *testing.T, m *ent.Merchant, set ...func(*ent.CheckoutSessionCreate)) *ent.CheckoutSession {
	t.Helper()
	c := h.db.Ent.CheckoutSession.Create().
		SetMerchantID(m.ID).
		SetExternalID("cs_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")).
		SetLivemode(false).
		SetAmountUsd(decimal.RequireFromString("12.50")).
		SetCurrency("USD").
		SetDescription("Order #42").
		SetCancelURL("https://shop.example/cart/42").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC())
	for _, s := range set {
		s(c)
	}
	return c.SaveX(context.Background())
}

type response struct {
	status int
	header http.Header
	body   string
}

func (h *harness) get(t *testing.T, path string) response {
	t.Helper()
	res, err := h.srv.Client().Get(h.srv.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{res.StatusCode, res.Header, string(b)}
}

// assertNoExternalAssets checks that the page loads nothing from another
// origin (no CDN) and that html/template refused nothing.
func assertPageHygiene(t *testing.T, body string) {
	t.Helper()
	require.Contains(t, body, `<meta name="viewport" content="width=device-width, initial-scale=1">`)
	require.NotContains(t, body, "ZgotmplZ")
	require.NotRegexp(t, `(?i)<(script|link|img)[^>]+(src|href)="(https?:)?//`, body)
}

func TestCheckoutPage(t *testing.T) {
	h := newHarness(t, true)
	sess := h.session(t, h.merchant(t))

	res := h.get(t, "/pay/"+sess.ExternalID)
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Equal(t, "text/html; charset=utf-8", res.header.Get("Content-Type"))
	require.Equal(t, "DENY", res.header.Get("X-Frame-Options"))
	require.Contains(t, res.header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	assertPageHygiene(t, res.body)
	require.Contains(t, res.body, "Acme Coffee")
	// The brand colour is too light for white text (3.93:1) and for links
	// on the white card: black text on it, links in the page's text
	// colour (agentpay.BrandColorsFor).
	require.Contains(t, res.body, "--brand: "+brandColor+"; --on-brand: #000000; --brand-link: #111827;")
	require.Contains(t, res.body, `<span id="amount">12.50</span>`)
	require.Contains(t, res.body, "USD")
	require.Contains(t, res.body, "Order #42")
	require.Regexp(t, `<button type="button" class="chain" data-chain="base" data-token="USDC">Base</button>`, res.body)
	require.Regexp(t, `<button type="button" class="chain" data-chain="solana" data-token="USDC">Solana</button>`, res.body)
	require.Contains(t, res.body, `href="https://shop.example/cart/42"`)
	require.Contains(t, res.body, `data-success-url="https://shop.example/thanks"`)
	require.Contains(t, res.body, `data-api="/checkout/pay/`+sess.ExternalID+`"`)
	require.Contains(t, res.body, `data-expires-at="`+sess.ExpiresAt.UTC().Format(time.RFC3339)+`"`)
	require.Contains(t, res.body, `<header class="merchant">`)
	require.Regexp(t, `<section id="pay" class="pay" hidden>`, res.body, "no deposit before a chain is chosen")

	// The brand colour's <style> carries the CSP nonce.
	m := regexp.MustCompile(`<style nonce="([^"]+)">`).FindStringSubmatch(res.body)
	require.Len(t, m, 2)
	require.Contains(t, res.header.Get("Content-Security-Policy"), "'nonce-"+m[1]+"'")

	// Assets are served from the binary.
	for path, ctype := range map[string]string{"/pay/assets/ui.css": "text/css", "/pay/assets/page.js": "text/javascript"} {
		a := h.get(t, path)
		require.Equal(t, http.StatusOK, a.status, path)
		require.Contains(t, a.header.Get("Content-Type"), ctype, path)
		require.NotEmpty(t, a.body, path)
	}
	require.Contains(t, h.get(t, "/pay/assets/page.js").body, "/status")
}

func TestCheckoutPageEmbed(t *testing.T) {
	h := newHarness(t, false)
	sess := h.session(t, h.merchant(t))

	res := h.get(t, "/pay/"+sess.ExternalID+"/embed")
	require.Equal(t, http.StatusOK, res.status, res.body)
	assertPageHygiene(t, res.body)
	require.Empty(t, res.header.Get("X-Frame-Options"), "the embed page may be framed")
	require.Contains(t, res.header.Get("Content-Security-Policy"), "frame-ancestors *")
	require.Contains(t, res.body, `<body class="embed">`)
	require.NotContains(t, res.body, `<header class="merchant">`, "no outer chrome")
	require.NotContains(t, res.body, "Secured by agentpay")
	require.Contains(t, res.body, `<strong id="merchant-name">Acme Coffee</strong>`)
	require.Contains(t, res.body, "--brand: "+brandColor)
	require.Contains(t, res.body, `<span id="amount">12.50</span>`)
	require.Contains(t, res.body, `data-chain="base"`)
	require.NotContains(t, res.body, `data-chain="solana"`, "solana is not configured here")
	require.Contains(t, res.body, `data-embed="true"`)
	require.Contains(t, res.body, `target="_top"`, "cancel leaves the iframe")
}

func TestCheckoutPageNotFound(t *testing.T) {
	h := newHarness(t, false)
	for _, path := range []string{"/pay/cs_test_nope", "/pay/cs_test_nope/embed", "/pay/cs_test_nope/qr.svg?chain=base", "/pay/cs_test_nope/other"} {
		res := h.get(t, path)
		require.Equal(t, http.StatusNotFound, res.status, path)
		require.Equal(t, "text/html; charset=utf-8", res.header.Get("Content-Type"), path)
		require.Contains(t, res.body, "Checkout not found", path)
		require.Contains(t, res.body, `name="viewport"`, path)
	}
}

// TestCheckoutPageOpen: the chain buttons show only while the service says
// the session is open; a session past expires_at that the expiry job has
// not marked yet is closed too.
func TestCheckoutPageOpen(t *testing.T) {
	h := newHarness(t, false)
	m := h.merchant(t)
	for _, tt := range []struct {
		name string
		set  func(*ent.CheckoutSessionCreate)
		open bool
	}{
		{"pending", func(*ent.CheckoutSessionCreate) {}, true},
		{"past its deadline, not yet expired", func(c *ent.CheckoutSessionCreate) {
			c.SetExpiresAt(time.Now().Add(-time.Second).UTC())
		}, false},
		{"confirmed", func(c *ent.CheckoutSessionCreate) { c.SetStatus(checkoutsession.StatusConfirmed) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sess := h.session(t, m, tt.set)
			res := h.get(t, "/pay/"+sess.ExternalID)
			require.Equal(t, http.StatusOK, res.status, res.body)
			if tt.open {
				require.Contains(t, res.body, `<section id="choose" class="choose">`)
			} else {
				require.Contains(t, res.body, `<section id="choose" class="choose" hidden>`)
			}
		})
	}
}

func TestCheckoutPageAfterSelect(t *testing.T) {
	h := newHarness(t, true)
	ctx := context.Background()
	sess := h.session(t, h.merchant(t))

	// No chain selected yet: no QR code.
	require.Equal(t, http.StatusNotFound, h.get(t, "/pay/"+sess.ExternalID+"/qr.svg?chain=base").status)

	d, err := h.svc.SelectPaymentMethod(ctx, sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)

	res := h.get(t, "/pay/"+sess.ExternalID)
	require.Equal(t, http.StatusOK, res.status, res.body)
	assertPageHygiene(t, res.body)
	require.Contains(t, res.body, `<code id="address" class="address">`+d.Address+`</code>`)
	require.Contains(t, res.body, `data-base-units="12500000"`)
	require.Contains(t, res.body, `>12.50</span> <span id="token">USDC</span>`)
	require.Contains(t, res.body, `href="`+strings.ReplaceAll(d.PaymentURI, "&", "&amp;")+`"`, "wallet deep link")
	require.Regexp(t, `<section id="choose" class="choose" hidden>`, res.body)
	svg, err := web.QRSVG(d.PaymentURI)
	require.NoError(t, err)
	require.Contains(t, res.body, svg, "the QR code is inline in the page")

	qr := h.get(t, "/pay/"+sess.ExternalID+"/qr.svg?chain=base")
	require.Equal(t, http.StatusOK, qr.status, qr.body)
	require.Equal(t, "image/svg+xml", qr.header.Get("Content-Type"))
	require.Equal(t, svg, qr.body)
	assertQRDecodes(t, qr.body, d.PaymentURI)

	// Another chain than the selected one has no QR code here.
	require.Equal(t, http.StatusNotFound, h.get(t, "/pay/"+sess.ExternalID+"/qr.svg?chain=solana").status)
}

// assertQRDecodes parses svg back into its module matrix and compares it
// with the QR encoding of uri: a valid SVG document, version-sized
// (17+4v modules a side plus the quiet zone), module for module.
func assertQRDecodes(t *testing.T, svg, uri string) {
	t.Helper()
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		ViewBox string   `xml:"viewBox,attr"`
		Modules int      `xml:"data-modules,attr"`
		Rect    struct {
			Fill string `xml:"fill,attr"`
		} `xml:"rect"`
		Path struct {
			Fill string `xml:"fill,attr"`
			D    string `xml:"d,attr"`
		} `xml:"path"`
	}
	require.NoError(t, xml.Unmarshal([]byte(svg), &doc))
	require.Equal(t, "http://www.w3.org/2000/svg", doc.XMLName.Space)
	want, err := web.QRMatrix(uri)
	require.NoError(t, err)
	n := len(want)
	require.Equal(t, 1, (n-17)%4+1, "a QR side is 17+4v modules, got %d", n)
	require.True(t, n >= 21 && n <= 177)
	require.Equal(t, n, doc.Modules)
	require.Equal(t, fmt.Sprintf("0 0 %d %d", n+8, n+8), doc.ViewBox)
	require.Equal(t, "#fff", doc.Rect.Fill)
	require.Equal(t, "#000", doc.Path.Fill)

	got := make([][]bool, n)
	for i := range got {
		got[i] = make([]bool, n)
	}
	runs := regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-(\d+)z`).FindAllStringSubmatch(doc.Path.D, -1)
	require.NotEmpty(t, runs)
	for _, r := range runs {
		x, _ := strconv.Atoi(r[1])
		y, _ := strconv.Atoi(r[2])
		w, _ := strconv.Atoi(r[3])
		require.Equal(t, r[3], r[4])
		for i := 0; i < w; i++ {
			require.False(t, got[y-4][x-4+i], "module drawn twice")
			got[y-4][x-4+i] = true
		}
	}
	require.Equal(t, want, got)
	// Finder patterns: the top-left 7x7 has a dark ring and a light ring.
	for i := 0; i < 7; i++ {
		require.True(t, got[0][i] && got[6][i] && got[i][0] && got[i][6])
	}
	require.False(t, got[1][1] || got[5][5])
	require.True(t, got[3][3])
}

func TestQRSVG(t *testing.T) {
	const uri = "ethereum:0x036CbD53842c5426634e7929541eC2318f3dCF7e@84532/transfer?address=0x8ba1f109551bD432803012645Ac136ddd64DBA72&uint256=12500000"
	a, err := web.QRSVG(uri)
	require.NoError(t, err)
	b, err := web.QRSVG(uri)
	require.NoError(t, err)
	require.Equal(t, a, b, "deterministic")
	assertQRDecodes(t, a, uri)
	m, err := web.QRMatrix(uri)
	require.NoError(t, err)
	// 131 bytes in byte mode at level M: version 8, 49 modules a side.
	require.Equal(t, 49, len(m))

	other, err := web.QRSVG(uri + "0")
	require.NoError(t, err)
	require.NotEqual(t, a, other)

	small, err := web.QRMatrix("hello")
	require.NoError(t, err)
	require.Len(t, small, 21, "version 1")
}

// waitCheckout waits until cond, a JavaScript expression of c (the page's
// #checkout element), holds.
func waitCheckout(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(c => `+cond+`)(document.getElementById("checkout"))`, chromedp.WithPollingTimeout(15*time.Second))
}

// TestCheckoutPageBrowser drives the page in headless Chromium: choose base,
// read the deposit address and amount off the page, pay them from the
// devnet faucet, and watch the status poll. When the payment is processed
// to confirmed (the deposit scan is driven here as the worker would), the
// page must redirect to success_url.
func TestCheckoutPageBrowser(t *testing.T) {
	h := newHarness(t, false)
	thanks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!DOCTYPE html><title>Thanks</title><p id=thanks>Thanks</p>")
	}))
	t.Cleanup(thanks.Close)
	successURL := thanks.URL + "/thanks?order=42"
	sess := h.session(t, h.merchant(t), func(c *ent.CheckoutSessionCreate) { c.SetSuccessURL(successURL) })

	bctx := testenv.StartBrowser(t)
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(h.srv.URL+"/pay/"+sess.ExternalID),
		chromedp.WaitVisible(`button.chain[data-chain="base"]`),
		chromedp.Click(`button.chain[data-chain="base"]`),
		chromedp.WaitVisible(`#pay`),
		chromedp.WaitVisible(`#qr svg`),
	))
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		require.NoError(t, err, sel)
		return v
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(sel, name))
		require.NoError(t, err, sel)
		require.True(t, v.Exists, "%s[%s]", sel, name)
		return v.Value
	}
	address, amount := text(`#address`), text(`#amount-token`)
	decimals, wallet := attr(`#amount-token`, "data-decimals"), attr(`#wallet-link`, "href")
	qr, err := chromedp.Run(ctx, chromedp.OuterHTML(`#qr svg`))
	require.NoError(t, err)
	require.True(t, common.IsHexAddress(address), "address %q", address)
	require.Equal(t, "12.50", amount)
	require.True(t, strings.HasPrefix(wallet, "ethereum:"+h.evm.USDC.Hex()+"@"), wallet)
	require.Contains(t, wallet, "address="+address)
	require.Contains(t, qr, "<path")
	sel, err := h.svc.CheckoutPage(context.Background(), sess.ExternalID, "")
	require.NoError(t, err)
	require.NotNil(t, sel.Deposit)
	require.Equal(t, sel.Deposit.Address, address, "the page shows the session's deposit address")

	// The deposit scan, run by the worker in production; the first scan
	// sets the watcher's cursor at the head, before the payment.
	scan := func() {
		_, err := h.svc.ScanDeposits(context.Background(), agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
	}
	scan()

	dec, err := strconv.Atoi(decimals)
	require.NoError(t, err)
	units := decimal.RequireFromString(amount).Shift(int32(dec)).BigInt()
	_, err = h.evm.Send(context.Background(), common.HexToAddress(address), units)
	require.NoError(t, err)

	// The live status: the page polls at load, then the sessionStatus
	// subscription takes over (data-transport="ws"). The page subscribes
	// at load, so the subscription has usually delivered "pending" before
	// the chain was chosen; "detecting" comes later, when the select's
	// commit reaches the status listener (NOTIFY), and nothing orders that
	// before the steps above: wait for it to be shown.
	err = chromedp.Do(ctx, waitCheckout(`c.dataset.transport === "ws" && c.dataset.status === "detecting"`))
	if err != nil {
		ws, _ := chromedp.Run(ctx, chromedp.AttributeValue(`#checkout`, "data-ws"))
		transport, _ := chromedp.Run(ctx, chromedp.AttributeValue(`#checkout`, "data-transport"))
		t.Fatalf("the sessionStatus subscription did not deliver detecting (websocket state %q, transport %q, status %q): %v",
			ws.Value, transport.Value, attr(`#checkout`, "data-status"), err)
	}
	require.NotEmpty(t, attr(`#checkout`, "data-polls"), "the page polled at load")
	require.Equal(t, "detecting", attr(`#checkout`, "data-status"))
	require.Equal(t, "Waiting for your payment…", text(`#status-message`), "a sentence, not the status word")
	t.Logf("status polls before the subscription delivered: %s", attr(`#checkout`, "data-polls"))

	// Without a GraphQL endpoint the page keeps polling every 3 s.
	noWS := httptest.NewServer(rest.NewRouter(rest.Config{
		Service: h.svc, Logger: h.logger,
		Pages: web.NewHandler(web.Config{Service: h.svc, Logger: h.logger, GraphQLPath: "/graphql"}),
	}))
	t.Cleanup(noWS.Close)
	pctx, cancelPoll := chromedp.NewContext(bctx) // another tab
	defer cancelPoll()
	pctx, cancelPollTimeout := context.WithTimeout(pctx, time.Minute)
	defer cancelPollTimeout()
	require.NoError(t, chromedp.Do(pctx,
		chromedp.Navigate(noWS.URL+"/pay/"+sess.ExternalID),
		chromedp.WaitVisible(`#qr svg`), // selected: the page renders the deposit
		waitCheckout(`Number(c.dataset.polls || 0) >= 2 && c.dataset.transport === "poll"`),
	))
	polled, err := chromedp.Run(pctx, chromedp.AttributeValue(`#checkout`, "data-status"))
	require.NoError(t, err)
	require.Equal(t, "detecting", polled.Value)
	require.NoError(t, chromedp.Do(pctx, chromedp.Navigate("about:blank")))

	// Drive the deposit scan as the worker would and wait for confirmed.
	deadline := time.Now().Add(30 * time.Second)
	var status string
	for time.Now().Before(deadline) {
		h.evm.Commit()
		scan()
		st, err := h.svc.CheckoutStatus(context.Background(), sess.ExternalID, "")
		require.NoError(t, err)
		status = string(st.Status)
		if status == "confirmed" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.Equal(t, "confirmed", status, "the page shows %q", attr(`#checkout`, "data-status"))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(`#thanks`)))
	location, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Equal(t, successURL, location, "confirmed redirects to success_url")
	t.Logf("confirmed; the page redirected to %s", location)
}

// TestCheckoutPageBrowserLatePoll: a status poll read before a change but
// answered after the sessionStatus subscription delivered the change must
// not put the page back to the older status (polling has stopped by then,
// so nothing would correct it until the next change). The page's first
// poll is read at once and its answer held back while the session changes
// from pending to detecting.
func TestCheckoutPageBrowserLatePoll(t *testing.T) {
	h := newHarness(t, false)
	sess := h.session(t, h.merchant(t))

	read, release := make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/"+sess.ExternalID+"/status") || !holding.CompareAndSwap(false, true) {
			h.api.ServeHTTP(w, r)
			return
		}
		answer := httptest.NewRecorder()
		h.api.ServeHTTP(answer, r)
		close(read)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		maps.Copy(w.Header(), answer.Header())
		w.WriteHeader(answer.Code)
		_, _ = w.Write(answer.Body.Bytes())
	}))
	t.Cleanup(srv.Close)

	bctx := testenv.StartBrowser(t)
	ctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/pay/"+sess.ExternalID)))
	select {
	case <-read:
	case <-ctx.Done():
		t.Fatal("the page did not poll its status at load")
	}
	require.NoError(t, chromedp.Do(ctx, waitCheckout(`c.dataset.transport === "ws" && c.dataset.status === "pending"`)),
		"the subscription delivers the status while the poll's answer is held")

	_, err := h.svc.SelectPaymentMethod(context.Background(), sess.ExternalID, "", "base", "USDC")
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, waitCheckout(`c.dataset.status === "detecting"`)), "the subscription delivers detecting")

	// Count the status answers the page reads: the page's handler of an
	// answer runs in the task that counts it (a later microtask), so once
	// the count is seen, the handler has run.
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		window.statusAnswers = 0;
		const json = Response.prototype.json;
		Response.prototype.json = function () {
			return json.call(this).then(v => { if (this.url.endsWith("/status")) window.statusAnswers++; return v; });
		};
	})()`)))
	close(release)
	require.NoError(t, chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`window.statusAnswers >= 1`, chromedp.WithPollingTimeout(15*time.Second))),
		"the held poll is answered")
	status, err := chromedp.Run(ctx, chromedp.AttributeValue(`#checkout`, "data-status"))
	require.NoError(t, err)
	require.Equal(t, "detecting", status.Value, "the late answer (pending) does not replace the subscription's newer status")
}
