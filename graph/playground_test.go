package graph

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"

	"agentpay"
	"agentpay/graph/playground"
	"agentpay/internal/testenv"
)

// TestPlaygroundExamplesMatchTheSchema: every saved example operation of
// the playground is valid against the schema the handler serves, so a
// renamed field breaks here rather than in a developer's first try.
func TestPlaygroundExamplesMatchTheSchema(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	for _, ex := range playground.Examples() {
		_, errs := gqlparser.LoadQueryWithRules(schema, ex.Query, nil)
		require.Empty(t, errs, ex.Query)
		if ex.Variables != "" {
			var vars map[string]any
			require.NoError(t, json.Unmarshal([]byte(ex.Variables), &vars), ex.Variables)
		}
	}
}

// offlineBrowser is a browser tab whose every request to another host than
// the test server's fails (as on a machine without internet) and is kept.
type offlineBrowser struct {
	ctx context.Context

	mu       sync.Mutex
	requests []string // every URL the page asked for, websockets included
	blocked  []string
}

func newOfflineBrowser(t *testing.T, ctx context.Context, server string) *offlineBrowser {
	t.Helper()
	host := mustHost(t, server)
	b := &offlineBrowser{ctx: ctx}
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	sockets := chromedp.Events(ctx, network.WebSocketCreated)
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	_, err = chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}})
	require.NoError(t, err)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			b.keep(ev.Request.URL, hostOf(ev.Request.URL) != host)
			if hostOf(ev.Request.URL) == host {
				_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			} else {
				_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonInternetDisconnected})
			}
		}
	}()
	go func() {
		for ev, err := range sockets {
			if err != nil {
				return
			}
			b.keep(ev.URL, hostOf(ev.URL) != host) // not paused by Fetch: kept, and checked at the end
		}
	}()
	// Content-Security-Policy violations, kept by the page from its start.
	_, err = chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.cspViolations = [];
		document.addEventListener("securitypolicyviolation", (e) => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));`})
	require.NoError(t, err)
	return b
}

func (b *offlineBrowser) keep(u string, blocked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests = append(b.requests, u)
	if blocked {
		b.blocked = append(b.blocked, u)
	}
}

func (b *offlineBrowser) seen() (requests, blocked []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...), append([]string(nil), b.blocked...)
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

func mustHost(t *testing.T, u string) string {
	t.Helper()
	h := hostOf(u)
	require.NotEmpty(t, h, u)
	return h
}

// playgroundJS drives GraphiQL's editors (CodeMirror 5 instances) the way
// a person typing would change them: through the editor, so GraphiQL sees
// the change.
const playgroundJS = `window.pg = {
	editor(sel) { const el = document.querySelector(sel + " .CodeMirror"); return el && el.CodeMirror; },
	set(name, text) {
		document.querySelector('.graphiql-editor-tools button[data-name="' + name + '"]').click();
		return new Promise((done) => setTimeout(() => {
			this.editor("section.graphiql-editor-tool .graphiql-editor:not(.hidden)").setValue(text);
			done(true);
		}, 50));
	},
	response() { const cm = this.editor(".graphiql-response"); return cm ? cm.getValue() : ""; },
};`

// TestPlaygroundOffline: /playground works with no outside network. In
// headless Chromium that reaches only the test server, the page loads
// GraphiQL from the binary, runs the saved examples as they are (register
// an agent, read it with the X-Agent-Key the Headers editor sends, create
// a session with the merchant key), and the SessionStatus subscription
// over the API's websocket shows the session's change; the Headers
// editor's keys reach the websocket too (a bad one is refused). Nothing
// was requested from another host and the page's CSP refused nothing.
func TestPlaygroundOffline(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	cfg := agentpay.Config{}
	env.Fill(&cfg)
	svc, err := agentpay.NewService(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/graphql", NewHandler(HandlerConfig{Service: svc, Logger: cfg.Logger, Introspection: true}))
	pg := playground.New(playground.Config{Path: "/playground", Endpoint: "/graphql"})
	mux.Handle("/playground", pg)
	mux.Handle("/playground/", pg)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx0 := context.Background()
	name, email := "Playground Shop", "shop@example.com"
	merchant, err := svc.RegisterMerchant(ctx0, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)

	bctx := testenv.StartBrowser(t)
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	browser := newOfflineBrowser(t, ctx, srv.URL)

	err = chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(srv.URL+"/playground"),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll(".graphiql-tab").length === 5 && !!document.querySelector(".graphiql-query-editor .CodeMirror")`,
			chromedp.WithPollingTimeout(20*time.Second)),
	)
	_, blocked := browser.seen()
	require.NoError(t, err, "GraphiQL did not start; requests to other hosts: %v", blocked)
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](playgroundJS)))

	keysPanel, err := chromedp.Run(ctx, chromedp.Text(`.graphiql-plugin .playground-keys`))
	require.NoError(t, err)
	require.Contains(t, keysPanel, "X-Agent-Key")
	require.Contains(t, keysPanel, "X-Checkout-Secret-Key")

	// run runs the open tab and waits for an answer matching ok.
	run := func(ok string) map[string]any {
		t.Helper()
		// GraphiQL takes the operation name from the editor a moment
		// after a tab's text changes; a run in that moment sends the tab
		// before's name ("operation Me not found"), which GraphiQL's own
		// user would answer by pressing run again. So does this.
		var answer string
		for attempt := 1; ; attempt++ {
			require.NoError(t, chromedp.Do(ctx,
				chromedp.Evaluate[chromedp.Void](`pg.editor(".graphiql-response") && pg.editor(".graphiql-response").setValue("")`),
				chromedp.Click(`.graphiql-execute-button`)))
			var err error
			answer, err = chromedp.Run(ctx, chromedp.Poll[string](`(() => { const r = pg.response(); return ((`+ok+`) || /operation \w+ not found/.test(r)) && r; })()`,
				chromedp.WithPollingTimeout(20*time.Second)))
			if err != nil {
				last, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`pg.response()`))
				require.NoError(t, err, "waiting for %s; the response pane shows %s", ok, last)
			}
			if !strings.Contains(answer, "not found") || attempt == 5 {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(answer), &out), answer)
		return out
	}
	// tab opens a tab ("" stays on the open one; GraphiQL saves editor
	// changes into the tab after a moment, so the open one is not clicked
	// again) and sets its headers and variables.
	tab := func(i, operation, headers, variables string) {
		t.Helper()
		if i != "" {
			// The click swaps the editor's text a moment later: running
			// before it runs the tab before's operation name against the
			// new text ("operation Me not found").
			require.NoError(t, chromedp.Do(ctx,
				chromedp.Click(`#graphiql-session-tab-`+i),
				chromedp.Poll[chromedp.Void](`document.querySelector(".graphiql-query-editor .CodeMirror").CodeMirror.getValue().includes(`+jsString(t, operation)+`)`,
					chromedp.WithPollingTimeout(10*time.Second)),
			))
		}
		if headers != "" {
			require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`pg.set("headers", `+jsString(t, headers)+`)`, chromedp.EvalAwaitPromise)))
		}
		if variables != "" {
			require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`pg.set("variables", `+jsString(t, variables)+`)`, chromedp.EvalAwaitPromise)))
		}
	}
	field := func(out map[string]any, path ...string) string {
		t.Helper()
		var v any = out["data"]
		for _, p := range path {
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v at %s", out, p)
			v = m[p]
		}
		s, ok := v.(string)
		require.True(t, ok, "%v: %v", path, out)
		return s
	}

	// RegisterAgent, as saved (the first tab, open at start).
	out := run(`r.includes("quickRegister")`)
	apiKey := field(out, "quickRegister", "apiKey")
	require.Equal(t, "playground_agent", field(out, "quickRegister", "username"))

	// Me, with the key in the Headers editor: sent as X-Agent-Key.
	tab("1", "query Me", `{"X-Agent-Key": "`+apiKey+`"}`, "")
	out = run(`r.includes('"me"')`)
	require.Equal(t, "playground_agent", field(out, "me", "username"))

	// CreateSession with the merchant's test key.
	tab("2", "mutation CreateSession", `{"X-Checkout-Secret-Key": "`+merchant.Keys.TestSecretKey+`"}`, "")
	out = run(`r.includes("createSession")`)
	externalID := field(out, "createSession", "externalId")
	require.Equal(t, "PENDING", field(out, "createSession", "status"))

	// SessionStatus over the websocket. A wrong key in the Headers editor
	// goes in connection_init and closes the socket (4403), although the
	// subscription is public: the editor's headers reach the socket.
	tab("3", "subscription SessionStatus", `{"X-Agent-Key": "not-a-key"}`, `{"externalId": "`+externalID+`"}`)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`.graphiql-execute-button`)))
	refused, err := chromedp.Run(ctx, chromedp.Poll[string](`pg.response()`, chromedp.WithPollingTimeout(5*time.Second)))
	require.NoError(t, err, "a refused key is told at once")
	require.Contains(t, refused, `"code": "FORBIDDEN"`)
	require.Contains(t, refused, "4403")

	tab("", "", `{}`, `{"externalId": "`+externalID+`"}`)
	out = run(`r.includes('"status": "PENDING"')`)
	require.Equal(t, externalID, field(out, "sessionStatus", "externalId"))
	auth, err := svc.AuthenticateMerchant(ctx0, merchant.Keys.TestSecretKey)
	require.NoError(t, err)
	_, err = svc.CancelSession(ctx0, auth, externalID)
	require.NoError(t, err)
	answer, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const r = pg.response(); return r.includes('"status": "CANCELLED"') && r; })()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the subscription shows the cancel")
	require.Contains(t, answer, externalID)

	// The rest of GraphiQL's parts: the schema's docs (by introspection)
	// and the settings dialog, under the same CSP.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`button[aria-label="Show Documentation Explorer"]`),
		chromedp.WaitVisible(`.graphiql-doc-explorer`),
		chromedp.Poll[chromedp.Void](`document.querySelector(".graphiql-doc-explorer").textContent.includes("Mutation")`),
		chromedp.Click(`button[data-value="settings"]`),
		chromedp.WaitVisible(`[role="dialog"]`),
	))

	requests, blocked := browser.seen()
	require.Empty(t, blocked, "requests to other hosts")
	var sockets int
	for _, u := range requests {
		if strings.HasPrefix(u, "ws://") {
			sockets++
			require.Equal(t, "ws://"+mustHost(t, srv.URL)+"/graphql", u)
		}
	}
	require.NotZero(t, sockets, "the subscriptions went over the API's websocket: %v", requests)
	violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.cspViolations`))
	require.NoError(t, err)
	require.Empty(t, violations, "the page's Content-Security-Policy refused nothing")
}

func jsString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}
