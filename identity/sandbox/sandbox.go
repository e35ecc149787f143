// Package sandbox is an identity provider that runs inside `agentpay dev`
// and the tests (docs/identity-and-cards.md). It behaves as the hosted
// flows of real providers do: Start gives a page for the person (served
// by Handler under /dev/kyc/), where the tester chooses the outcome; the
// page then calls the service's callback endpoint over HTTP with a signed
// result, exactly as a real provider's servers would, and sends the
// person back to the app.
//
// Callbacks are signed with HMAC-SHA256 over "<unix time>.<body>" and the
// signature header is "Sandbox-Signature: t=<unix time>,v1=<hex>", the
// scheme of most providers' webhooks. A callback older or newer than
// Tolerance is refused, so a captured one cannot be replayed later; the
// service refuses a replay within the window by its event id.
//
// The sessions a sandbox started live in its memory (a real provider
// keeps them on its side): restarting `agentpay dev` forgets them, and
// the person starts again from the app.
package sandbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"agentpay/identity"
)

// Name is the sandbox's provider name (/identity/callbacks/sandbox).
const Name = "sandbox"

// SignatureHeader carries a callback's signature.
const SignatureHeader = "Sandbox-Signature"

// Tolerance is how far a callback's time may be from the receiver's clock.
const Tolerance = 5 * time.Minute

// maxSessions bounds the sessions kept: the oldest go first.
const maxSessions = 10_000

// Config configures a Sandbox.
type Config struct {
	// Secret signs the callbacks (at least 32 bytes).
	Secret []byte
	// PagePath is where Handler is mounted ("/dev/kyc" when empty).
	PagePath string
	// CallbackURL is the service's callback endpoint. Empty: the page's
	// own origin + /identity/callbacks/sandbox, as the request's Host
	// names it (tests); `agentpay dev` sets the address it listens on, so
	// a forged Host header cannot send a signed result elsewhere.
	CallbackURL string
	// Client calls the callback endpoint (a 10-second client when nil).
	Client *http.Client
}

// Sandbox is the provider and its pages.
type Sandbox struct {
	cfg  Config
	tmpl *template.Template

	mu       sync.Mutex
	sessions map[string]session
	order    []string
}

type session struct {
	verificationID, returnURL string
	state                     identity.State
}

var _ identity.Provider = (*Sandbox)(nil)

// New makes a sandbox.
func New(cfg Config) (*Sandbox, error) {
	if len(cfg.Secret) < 32 {
		return nil, fmt.Errorf("sandbox: the callback secret must be at least 32 bytes")
	}
	if cfg.PagePath == "" {
		cfg.PagePath = "/dev/kyc"
	}
	cfg.PagePath = strings.TrimRight(cfg.PagePath, "/")
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Sandbox{cfg: cfg, tmpl: template.Must(template.New("page").Parse(pageHTML)), sessions: map[string]session{}}, nil
}

// Name implements identity.Provider.
func (s *Sandbox) Name() string { return Name }

// Start implements identity.Provider: a new session and its page.
func (s *Sandbox) Start(_ context.Context, req identity.StartRequest) (identity.Started, error) {
	var b [15]byte
	if _, err := rand.Read(b[:]); err != nil {
		return identity.Started{}, err
	}
	ref := "sbx_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) >= maxSessions {
		delete(s.sessions, s.order[0])
		s.order = s.order[1:]
	}
	s.sessions[ref] = session{verificationID: req.VerificationID, returnURL: req.ReturnURL, state: identity.StatePending}
	s.order = append(s.order, ref)
	return identity.Started{Reference: ref, URL: s.cfg.PagePath + "/" + ref}, nil
}

// callbackBody is a callback's JSON body.
type callbackBody struct {
	EventID    string         `json:"event_id"`
	Reference  string         `json:"reference"`
	State      identity.State `json:"state"`
	OccurredAt time.Time      `json:"occurred_at"`
}

// Callback implements identity.Provider.
func (s *Sandbox) Callback(header http.Header, body []byte, now time.Time) (identity.Result, error) {
	if err := Verify(s.cfg.Secret, header.Get(SignatureHeader), body, now); err != nil {
		return identity.Result{}, err
	}
	var b callbackBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return identity.Result{}, fmt.Errorf("%w: %v", identity.ErrMalformed, err)
	}
	switch {
	case b.EventID == "" || len(b.EventID) > 100:
		return identity.Result{}, fmt.Errorf("%w: event_id must be 1 to 100 characters", identity.ErrMalformed)
	case b.Reference == "" || len(b.Reference) > 100:
		return identity.Result{}, fmt.Errorf("%w: reference must be 1 to 100 characters", identity.ErrMalformed)
	case !b.State.Valid():
		return identity.Result{}, fmt.Errorf("%w: unknown state %q", identity.ErrMalformed, b.State)
	case b.OccurredAt.IsZero():
		return identity.Result{}, fmt.Errorf("%w: occurred_at is required", identity.ErrMalformed)
	}
	return identity.Result{EventID: b.EventID, Reference: b.Reference, State: b.State, OccurredAt: b.OccurredAt.UTC()}, nil
}

// Sign answers the signature header of body sent at t.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a signature header (Sign) against body at now.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: no timestamp or signature", identity.ErrSignature)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("%w: timestamp outside the %s tolerance", identity.ErrSignature, Tolerance)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no signature matches", identity.ErrSignature)
}

// Handler serves the sandbox's pages under PagePath:
//
//	GET  {PagePath}/{reference}  the hosted page: choose an outcome
//	POST {PagePath}/{reference}  call the service back with it, then go
//	                             back to the app
func (s *Sandbox) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref := strings.TrimPrefix(r.URL.Path, s.cfg.PagePath+"/")
		s.mu.Lock()
		sess, ok := s.sessions[ref]
		s.mu.Unlock()
		if !ok || strings.Contains(ref, "/") {
			s.render(w, http.StatusNotFound, page{Error: "No such verification here: start again from the app."})
			return
		}
		p := page{Reference: ref, State: string(sess.state)}
		switch r.Method {
		case http.MethodGet:
			s.render(w, http.StatusOK, p)
		case http.MethodPost:
			r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
			state := identity.State(r.PostFormValue("outcome"))
			if state == identity.StatePending || !state.Valid() {
				p.Error = "Choose an outcome."
				s.render(w, http.StatusBadRequest, p)
				return
			}
			if err := s.callBack(r, ref, state); err != nil {
				p.Error = err.Error()
				s.render(w, http.StatusBadGateway, p)
				return
			}
			s.mu.Lock()
			sess.state = state
			s.sessions[ref] = sess
			s.mu.Unlock()
			http.Redirect(w, r, sess.returnURL, http.StatusSeeOther)
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// callBack sends the signed result to the service, as a provider's server
// would.
func (s *Sandbox) callBack(r *http.Request, ref string, state identity.State) error {
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	body, err := json.Marshal(callbackBody{EventID: "evt_" + hex.EncodeToString(id[:]), Reference: ref, State: state, OccurredAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	url := s.cfg.CallbackURL
	if url == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		url = scheme + "://" + r.Host + "/identity/callbacks/" + Name
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(s.cfg.Secret, body, time.Now()))
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("the service's callback endpoint did not answer: %v", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the service refused the callback: %d %s", resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	return nil
}

type page struct {
	Reference, State, Error string
}

func (s *Sandbox) render(w http.ResponseWriter, status int, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_ = s.tmpl.Execute(w, p)
}

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Identity verification sandbox</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:1rem auto;padding:0 1rem}button{display:block;width:100%;margin:.5rem 0;padding:.75rem;font-size:1rem}.error{color:#b00020}</style>
</head>
<body>
<h1>Identity verification sandbox</h1>
<p>This page plays an identity provider's hosted flow in <code>agentpay dev</code>. No document is asked for: choose the outcome the provider reports.</p>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
{{if .Reference}}
<p>Verification <code>{{.Reference}}</code>, now <b id="kyc-state">{{.State}}</b>.</p>
<form method="post">
  <button type="submit" name="outcome" value="verified" id="kyc-verified">Verified</button>
  <button type="submit" name="outcome" value="requires_input" id="kyc-requires-input">Ask for more input</button>
  <button type="submit" name="outcome" value="rejected" id="kyc-rejected">Rejected</button>
</form>
{{end}}
</body>
</html>
`
