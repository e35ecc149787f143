package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/chromedp/chromedp"
)

// liveText reads an element's visible text in one evaluation, asking
// again until the element exists: the app re-renders its lists on every
// live event, and a node chromedp found by a query can be replaced before
// a separate read of it ("No node with given id found").
func liveText(ctx context.Context, sel string) (string, error) {
	js := `(e => e === null ? null : e.innerText)(document.querySelector(` + strconv.Quote(sel) + `))`
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
		if err == nil && v != nil {
			return *v, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("reading the text of %s: %v", sel, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clickJS clicks an enabled element from the page's script once it is
// there: the home re-renders its lists on live events, so the layout can
// move between chromedp.Click's measure of a button and its mouse event,
// which then lands elsewhere.
func clickJS(sel string) chromedp.Action[chromedp.Void] {
	q := `document.querySelector(` + strconv.Quote(sel) + `)`
	return chromedp.Steps(
		chromedp.Poll[chromedp.Void](q+` !== null && !`+q+`.disabled`, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate[chromedp.Void](q+`.click()`),
	)
}
