// Package playground serves GraphiQL for the GraphQL API (at /playground
// when GRAPHQL_PLAYGROUND is on: cmd/agentpay) entirely from the binary, so
// it works on a machine without internet.
//
// GraphiQL's prebuilt browser files (graphiql.min.js, which bundles
// graphql-js, CodeMirror and the graphql-ws client, its stylesheet, and
// React's UMD files) come from the npm packages package-lock.json pins:
// update.sh (`make playground`) copies them into assets/vendor, which is
// committed and embedded. Committed rather than built by the Go build, so
// `go build`, `go test` and `make run` need no npm and no network, and an
// upgrade is a reviewed change of the lock file and the copies together
// (assets/vendor/MANIFEST, checked by the tests). GraphiQL 4 is the last
// line that ships such a prebuilt file; 5 is ESM only, would need a bundler
// here and loads its editor (Monaco) in web workers.
//
// The page is a template: the endpoint, the example tabs (examples/*.graphql,
// checked against the schema by graph's tests) and the keys panel, whose
// header names are internal/httpx's, the ones the API reads. Its only
// script is assets/playground.js, so the Content-Security-Policy allows
// scripts from this host alone.
package playground

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"agentpay/internal/httpx"
	"agentpay/internal/vault"
)

//go:embed page.html
var pageHTML string

//go:embed assets
var assetsFS embed.FS

//go:embed examples/*.graphql
var examplesFS embed.FS

// Config places the playground.
type Config struct {
	// Path is where the page is served (e.g. /playground); its files are
	// under Path/assets/.
	Path string
	// Endpoint is the GraphQL path on this host (e.g. /graphql): HTTP for
	// queries and mutations, a websocket for subscriptions.
	Endpoint string
}

// Example is one saved operation, opened as a tab of its own.
type Example struct {
	// Query is the operation's text (with comments saying what to fill in).
	Query string `json:"query"`
	// Variables is a JSON object; Headers the JSON object of the Headers
	// editor: the key the operation needs, empty, or {} when public.
	Variables string `json:"variables,omitempty"`
	Headers   string `json:"headers"`
}

// Examples are the saved operations in tab order: register an agent, read
// it with its key, create a checkout session with a merchant key,
// subscribe to the session's status, and to the merchant's own events.
func Examples() []Example {
	return []Example{
		{Query: example("register-agent"), Variables: `{"username": "playground_agent"}`, Headers: headers()},
		{Query: example("me"), Headers: headers(httpx.AgentKeyHeader)},
		{
			Query:     example("create-session"),
			Variables: `{"input": {"amount": 12.50, "currency": "USD", "description": "Playground order"}}`,
			Headers:   headers(httpx.MerchantKeyHeader),
		},
		{Query: example("session-status"), Variables: `{"externalId": "cs_..."}`, Headers: headers()},
		{Query: example("merchant-events"), Variables: `{"after": 0}`, Headers: headers(httpx.MerchantKeyHeader)},
	}
}

func example(name string) string {
	b, err := examplesFS.ReadFile("examples/" + name + ".graphql")
	if err != nil {
		panic(err) // embedded: a missing file is a build mistake
	}
	return string(b)
}

// headers is the Headers editor's text with each named header empty.
func headers(names ...string) string {
	if len(names) == 0 {
		return "{}"
	}
	var b strings.Builder
	b.WriteString("{\n")
	for i, name := range names {
		q, _ := json.Marshal(name)
		b.WriteString("  " + string(q) + `: ""`)
		if i < len(names)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}")
	return b.String()
}

// key is one line of the keys panel: a part of the API and what it wants.
type key struct {
	Part, Header, Text string
}

// keys are the credentials each part of the API reads (graph/auth.go).
var keys = []key{
	{Part: "Public", Text: "quickRegister, agent, agentByUsername, checkUsername, leaderboard, stats, treasury, chains and the chainHead and sessionStatus subscriptions need no key."},
	{Part: "Agent API", Header: httpx.AgentKeyHeader, Text: "the agent's API key, the apiKey quickRegister answers (once). For me, send, regenerateApiKey, inviteHuman, requestPairing, sendToUser and the agentEvents subscription."},
	{Part: "Merchant API", Header: httpx.MerchantKeyHeader, Text: "a merchant secret key, sk_test_... (test mode) or sk_live_..., from POST /checkout/merchants/register (keys.test_secret_key). For merchant, sessions, session, payments, webhookEvents, createSession, cancelSession, updateMerchant, redeliverWebhook, rollWebhookSecret and the merchantEvents subscription."},
	{Part: "Signed-in person", Header: httpx.CSRFHeader, Text: "viewer and the app's mutations read the app's session cookie, which this browser sends once signed in to the app, and want its CSRF token too: the data-csrf of the app's home page."},
}

// pageData is what page.html is rendered with.
type pageData struct {
	Config pageConfig
	Keys   []key
}

// pageConfig is read by assets/playground.js.
type pageConfig struct {
	Endpoint       string    `json:"endpoint"`
	DefaultHeaders string    `json:"defaultHeaders"`
	Tabs           []Example `json:"tabs"`
	// StyleNonce is this answer's CSP nonce for the <style> elements
	// GraphiQL's dialogs insert (they read it as __webpack_nonce__).
	StyleNonce string `json:"styleNonce"`
}

// contentTypes are the files' types, fixed here rather than read from the
// machine's MIME tables.
var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
}

// asset is an embedded file with the hash that versions its URL.
type asset struct {
	body        []byte
	contentType string
	hash        string
}

type handler struct {
	page   *template.Template
	data   pageData
	prefix string // Path + "/assets/"
	assets map[string]asset
}

// New serves the page at cfg.Path (and cfg.Path + "/") and the embedded
// files under cfg.Path + "/assets/"; anything else is 404.
func New(cfg Config) http.Handler {
	h := &handler{prefix: strings.TrimSuffix(cfg.Path, "/") + "/assets/", assets: map[string]asset{}}
	err := fs.WalkDir(assetsFS, "assets", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assetsFS.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			ctype = "text/plain; charset=utf-8" // LICENSES.txt, MANIFEST
		}
		h.assets[strings.TrimPrefix(name, "assets/")] = asset{body: body, contentType: ctype, hash: hex.EncodeToString(sum[:8])}
		return nil
	})
	if err != nil {
		panic(err) // embedded files: cannot fail
	}
	tmpl := template.Must(template.New("page").Funcs(template.FuncMap{
		// asset is a file's URL, versioned by its content: the browser may
		// keep it for good, and an upgrade changes the URL.
		"asset": func(name string) (string, error) {
			a, ok := h.assets[name]
			if !ok {
				return "", fs.ErrNotExist
			}
			return h.prefix + name + "?v=" + a.hash, nil
		},
	}).Parse(pageHTML))
	h.page = tmpl
	h.data = pageData{
		Config: pageConfig{
			Endpoint:       cfg.Endpoint,
			DefaultHeaders: headers(httpx.AgentKeyHeader, httpx.MerchantKeyHeader),
			Tabs:           Examples(),
		},
		Keys: keys,
	}
	if err := tmpl.Execute(io.Discard, h.data); err != nil {
		panic(err) // the template and its data are fixed: a build mistake
	}
	return h
}

// pageCSP lets the page load its files from this host only and talk to the
// API on this host (connect-src 'self' covers the same host's ws: and wss:).
// GraphiQL's dialogs insert a <style> element, allowed by the answer's
// nonce; its fonts and icons are data: URLs in its stylesheet.
func pageCSP(nonce string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-" + nonce + "'; font-src 'self' data:; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if name, ok := strings.CutPrefix(r.URL.Path, h.prefix); ok {
		h.serveAsset(w, r, name)
		return
	}
	if strings.TrimSuffix(r.URL.Path, "/")+"/assets/" != h.prefix {
		http.NotFound(w, r)
		return
	}
	data := h.data
	data.Config.StyleNonce = vault.CSPNonce.New()
	var buf bytes.Buffer
	if err := h.page.Execute(&buf, data); err != nil {
		http.Error(w, "the playground could not be shown", http.StatusInternalServerError)
		return
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store") // a nonce is good for one answer
	hdr.Set("Content-Security-Policy", pageCSP(data.Config.StyleNonce))
	hdr.Set("X-Frame-Options", "DENY")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(buf.Bytes())
}

// serveAsset answers an embedded file: for good when the URL carries its
// current hash (the page's links), else to be checked again each time.
func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := h.assets[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("ETag", `"`+a.hash+`"`)
	if r.URL.Query().Get("v") == a.hash {
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hdr.Set("Cache-Control", "no-cache")
	}
	hdr.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
