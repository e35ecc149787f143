package testenv

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// ChromiumPath is where the browser tests find Chromium (Debian's
// package; .ci/run installs it).
const ChromiumPath = "/usr/bin/chromium"

// StartBrowser starts headless Chromium (a phone-sized window) until the
// test ends, or skips the test when Chromium is not installed. Start it
// after the service under test, so that it closes first, with the pages'
// websockets. Tabs are chromedp.NewContext of the returned context.
func StartBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Skipf("browser test skipped: %s not found (install it with `apt-get install -y chromium`)", ChromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(390, 844), // a phone
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(bctx), "start chromium") // no timeout on the first call
	return bctx
}

// RefuseCSPViolations fails the test if a page of the tab (a chromedp
// context, the one StartBrowser answers included) has anything refused by
// its Content-Security-Policy, which Chromium reports in the tab's log: a
// policy that breaks a page is caught even where the test's clicks would
// not notice (a style, a websocket of a part it does not drive). Call it
// before the tab's first navigation.
func RefuseCSPViolations(t *testing.T, tab context.Context) {
	t.Helper()
	var (
		mu         sync.Mutex
		violations []string
	)
	require.NoError(t, chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*cdplog.EventEntryAdded); ok && strings.Contains(e.Entry.Text, "Content Security Policy") {
			mu.Lock()
			violations = append(violations, e.Entry.URL+": "+e.Entry.Text)
			mu.Unlock()
		}
	}))
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, violations, "the pages' Content-Security-Policy refused something")
	})
}
