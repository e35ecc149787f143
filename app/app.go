package app

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
	"agentpay/internal/uikit"
	"agentpay/internal/vault"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the app.
type Config struct {
	Service *agentpay.Service
	Logger  *slog.Logger
	// Prefix is the app's path ("/app" when empty): APP_URL's path.
	Prefix string
	// URL is APP_URL: where passkeys work (their relying party is its
	// host), which the sign-in page points to when opened at another.
	URL string
	// GraphQLPath is the GraphQL endpoint on the same origin.
	GraphQLPath string
	// SecureCookies marks the cookies Secure (APP_URL is https).
	SecureCookies bool
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client (the sign-in limit per client IP).
	TrustedProxies []netip.Prefix
}

type handler struct {
	cfg  Config
	tmpl *template.Template
}

// formCookie holds the double-submit token of the forms shown before a
// session exists.
const formCookie = "agentpay_form"

// maxFormBytes bounds a form's body.
const maxFormBytes = 16 << 10

// maxPasskeyFormBytes bounds the passkey sign-in's form: the browser's
// answer (agentpay.MaxPasskeyResponseBytes of JSON), URL-encoded.
const maxPasskeyFormBytes = 3 * agentpay.MaxPasskeyResponseBytes

// NewHandler answers the app's pages under cfg.Prefix:
//
//	GET  /                  the signed-in home (else to /signin)
//	GET  /signin            the sign-in form      POST: mail a link
//	GET  /signin/{token}    the link's page       POST: spend it, sign in
//	POST /signin/passkey/begin   a passkey sign-in's options (JSON)
//	POST /signin/passkey/finish  its answer: sign in (JSON)
//	GET  /settings          display name, passkeys, sessions
//	GET  /dashboard         the merchant dashboard (docs/dashboard.md)
//	GET  /step-up/{token}   an e-mailed step-up   POST: confirm it
//	POST /signout           sign out this browser (or everywhere=1)
//	GET  /invite/{token}    an invitation         POST: sign up and accept
//	POST /invite/{token}/decline  decline an e-mailed invitation
//	GET  /unsubscribe/{token}     an agent mail's unsubscribe link  POST: unsubscribe
//	GET  /confirm-email/{token}   a merchant contact e-mail's confirmation  POST: confirm
//	GET  /assets/ui.css           the stylesheet shared with the hosted page (internal/uikit)
//	GET  /assets/*                JavaScript and the favicon
func NewHandler(cfg Config) http.Handler {
	if cfg.Prefix == "" {
		cfg.Prefix = "/app"
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{cfg: cfg, tmpl: template.Must(template.ParseFS(templateFS, "templates/*.html"))}
	r := chi.NewRouter()
	r.Use(securityHeaders, h.limitIP)
	r.Route(cfg.Prefix, func(r chi.Router) {
		r.Get("/", h.signedInPage("home.html"))
		r.Get("/signin", h.signInForm)
		r.Post("/signin", h.requestSignIn)
		r.Post("/signin/passkey/begin", h.beginPasskeySignIn)
		r.Post("/signin/passkey/finish", h.finishPasskeySignIn)
		r.Get("/settings", h.signedInPage("settings.html"))
		// The merchant dashboard's shell: its script picks a merchant the
		// viewer manages, opens a dashboard session for it (openDashboard,
		// with the cookie and CSRF token) and does the rest through the
		// merchant API with that session (X-Dashboard-Session), as any
		// merchant's own dashboard would with a secret key.
		r.Get("/dashboard", h.signedInPage("dashboard.html"))
		// Signing a merchant up (agentpay.SignUpMerchant): the page's
		// script posts the form here (JSON answer, the session's CSRF
		// token) and shows the keys of the answer, which exist nowhere
		// else: a reload shows the empty form.
		r.Get("/merchants/new", h.signedInPage("merchant_new.html"))
		r.Post("/merchants/new", h.signUpMerchant)
		// An e-mailed step-up's link (stepups.go): GET shows what it
		// confirms, the form confirms it, and the page that asked for it
		// goes on (it waits on viewer.stepUp).
		r.Get("/step-up/{token}", h.stepUpLink)
		r.Post("/step-up/{token}", h.confirmStepUp)
		r.Get("/signin/{token}", h.signInLink)
		r.Post("/signin/{token}", h.completeSignIn)
		r.Post("/signout", h.signOut)
		r.Get("/invite/{token}", h.invitation)
		r.Post("/invite/{token}", h.acceptInvitation)
		r.Post("/invite/{token}/decline", h.declineInvitation)
		r.Get("/unsubscribe/{token}", h.unsubscribeLink)
		r.Post("/unsubscribe/{token}", h.unsubscribe)
		r.Get("/confirm-email/{token}", h.merchantEmailLink)
		r.Post("/confirm-email/{token}", h.confirmMerchantEmail)
		// The stylesheet shared with the hosted page (internal/uikit).
		r.Get(uikit.Path, uikit.Stylesheet)
		static, _ := fs.Sub(staticFS, "static")
		r.Handle("/assets/*", http.StripPrefix(cfg.Prefix+"/assets/", http.FileServer(http.FS(static))))
	})
	return r
}

// contentSecurityPolicy is what every answer of the app may load and do:
// the hosted checkout page's strict policy (web/web.go) adapted to the
// app. Scripts and styles come from the app's own files only (no inline
// script or style anywhere: a page hands its script its settings in data-
// attributes, so no nonce is needed); the scripts talk to GraphQL on this
// origin only (fetch and the websocket; connect-src 'self' covers ws: and
// wss: of the same host); forms post here only; nothing frames a page,
// whose signed-in forms act for the person. TestEveryAppAnswerHasTheCSP
// holds every route to it, and the browser tests fail on any violation
// (testenv.RefuseCSPViolations).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders puts the policy and the other protective headers on
// every answer of the app (pages, redirects, JSON, files, refusals and
// not-found alike), so no page of the app, present or added later, goes
// without them. No page sends a Referer (a sign-in or invitation link's
// token is in its path).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// limitIP counts every page against the client IP's request limit
// (IP_RATE_LIMIT), as the API's unauthenticated routes are.
func (h *handler) limitIP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dec, err := h.cfg.Service.AllowIP(r.Context(), httpx.ClientIP(r, h.cfg.TrustedProxies), agentpay.RateRequest)
		if err != nil {
			httpx.ShowRate(w.Header(), dec, true)
			h.fail(w, r, "signin.html", page{}, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// page is what every template is given.
type page struct {
	Prefix, GraphQL, CSRF, FormToken, Error string
	Email, Username                         string
	NewAccount                              bool
	AgentUsername, Token                    string
	SignedIn                                bool
	// Reference: the invitation page was opened by the invitation's id
	// (what the agent was answered), which proves no address.
	Reference bool
	// MerchantName names the merchant of a contact e-mail confirmation.
	MerchantName string
	// Done: the page's action has been taken (declined, unsubscribed,
	// confirmed).
	Done bool
	// Passkeys: the server takes passkeys; AppURL is where (APP_URL).
	Passkeys bool
	AppURL   string
	// Summary is what an e-mailed step-up confirms; Confirmed that it was.
	Summary   string
	Confirmed bool
	// Notice says what the last action did (signed out), as a sentence.
	Notice string
}

func (h *handler) render(w http.ResponseWriter, status int, name string, p page) {
	p.Prefix, p.GraphQL = h.cfg.Prefix, h.cfg.GraphQLPath
	p.Passkeys, p.AppURL = h.cfg.Service.PasskeysOn(), h.cfg.URL
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := h.tmpl.ExecuteTemplate(w, name, p); err != nil {
		h.cfg.Logger.Error("app: rendering", "template", name, "err", err)
	}
}

// fail shows an error page with the service error's status and detail.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, name string, p page, err error) {
	status, detail := httpx.ErrorStatus(err, false)
	if status >= 500 {
		h.cfg.Logger.ErrorContext(r.Context(), "app", "path", r.URL.Path, "err", err)
		detail = "something went wrong; try again"
	}
	p.Error = detail
	h.render(w, status, name, p)
}

// formToken gives a pre-session form its double-submit token (kept in
// formCookie) and answers it.
func (h *handler) formToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(formCookie); err == nil && len(c.Value) > 20 && len(c.Value) < 100 {
		return c.Value
	}
	token := vault.CSPNonce.New()
	http.SetCookie(w, &http.Cookie{Name: formCookie, Value: token, Path: h.cfg.Prefix, HttpOnly: true,
		Secure: h.cfg.SecureCookies, SameSite: http.SameSiteStrictMode})
	return token
}

// checkForm reads a pre-session form: its body bounded, its token the
// cookie's.
func (h *handler) checkForm(w http.ResponseWriter, r *http.Request) error {
	return h.checkFormOf(w, r, maxFormBytes)
}

// checkFormOf is checkForm with a body of up to limit bytes.
func (h *handler) checkFormOf(w http.ResponseWriter, r *http.Request, limit int64) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		return agentpay.Invalid("form", "is not a valid form")
	}
	c, err := r.Cookie(formCookie)
	if err != nil || c.Value == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("form_token"))) != 1 {
		return agentpay.ErrCSRF
	}
	return nil
}

// viewer is the signed-in human of the request's session cookie, or nil.
func (h *handler) viewer(r *http.Request) *agentpay.Viewer {
	c, err := r.Cookie(httpx.SessionCookie)
	if err != nil {
		return nil
	}
	v, err := h.cfg.Service.AuthenticateBrowser(r.Context(), c.Value)
	if err != nil {
		return nil
	}
	return v
}

func (h *handler) setSession(w http.ResponseWriter, in *agentpay.SignIn) {
	http.SetCookie(w, &http.Cookie{
		Name: httpx.SessionCookie, Value: in.SessionToken, Path: "/", // the script sends it to /graphql
		Expires: in.Session.ExpiresAt, HttpOnly: true, Secure: h.cfg.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

// signedInPage serves a page of a signed-in person (its scripts do the
// rest over GraphQL with the cookie and the CSRF token it carries), or
// sends a visitor to sign in.
func (h *handler) signedInPage(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := h.viewer(r)
		if v == nil {
			to := h.cfg.Prefix + "/signin"
			if r.URL.Path != h.cfg.Prefix+"/" {
				to += "?next=" + url.QueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		if name == "home.html" && r.URL.Query().Get("home") == "" {
			// Where a person lands (agentpay.LandingOf): only a merchant
			// goes to the dashboard; ?home=1 is the home page anyway.
			if landing, err := h.cfg.Service.LandingOf(r.Context(), v); err == nil && landing == agentpay.LandingDashboard {
				http.Redirect(w, r, h.cfg.Prefix+"/dashboard", http.StatusSeeOther)
				return
			}
		}
		h.render(w, http.StatusOK, name, page{CSRF: v.CSRFToken(), SignedIn: true, Username: v.User.Username, Email: v.User.Email})
	}
}

// writeJSON answers the passkey sign-in's script.
func (h *handler) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		h.cfg.Logger.Error("app: answering", "err", err)
	}
}

// failJSON answers a service error as the API does: its status and
// {"detail": ...}.
func (h *handler) failJSON(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := httpx.ErrorStatus(err, false)
	if status >= 500 && status != http.StatusServiceUnavailable {
		h.cfg.Logger.ErrorContext(r.Context(), "app", "path", r.URL.Path, "err", err)
		detail = "something went wrong; try again"
	}
	h.writeJSON(w, status, map[string]string{"detail": detail})
}

// beginPasskeySignIn answers a usernameless sign-in's options for
// navigator.credentials.get: {"ceremony_id", "options"}. The page's form
// token (double submit) comes with it, as with the app's other forms.
func (h *handler) beginPasskeySignIn(w http.ResponseWriter, r *http.Request) {
	if err := h.checkForm(w, r); err != nil {
		h.failJSON(w, r, err)
		return
	}
	c, err := h.cfg.Service.BeginPasskeySignIn(r.Context(), httpx.ClientIP(r, h.cfg.TrustedProxies))
	if err != nil {
		h.failJSON(w, r, err)
		return
	}
	h.writeJSON(w, http.StatusOK, map[string]any{"ceremony_id": c.ID, "options": c.Options, "expires_at": c.ExpiresAt})
}

// finishPasskeySignIn spends the ceremony with the browser's answer
// (credential: the PublicKeyCredential as JSON) and sets the session
// cookie, as an e-mailed link's form does; the script then opens
// {"redirect"}.
func (h *handler) finishPasskeySignIn(w http.ResponseWriter, r *http.Request) {
	if err := h.checkFormOf(w, r, maxPasskeyFormBytes); err != nil {
		h.failJSON(w, r, err)
		return
	}
	in, err := h.cfg.Service.FinishPasskeySignIn(r.Context(), r.PostFormValue("ceremony_id"),
		[]byte(r.PostFormValue("credential")), r.UserAgent())
	if err != nil {
		h.failJSON(w, r, err)
		return
	}
	h.setSession(w, in)
	h.writeJSON(w, http.StatusOK, map[string]string{"redirect": h.takeNext(w, r)})
}

func (h *handler) signInForm(w http.ResponseWriter, r *http.Request) {
	h.keepNext(w, r.URL.Query().Get("next"))
	p := page{FormToken: h.formToken(w, r)}
	switch r.URL.Query().Get("signed_out") {
	case "here":
		p.Notice = "You are signed out of this browser."
	case "everywhere":
		p.Notice = "You are signed out of every browser."
	}
	h.render(w, http.StatusOK, "signin.html", p)
}

// nextCookie keeps, from the sign-in form to the sign-in (by an e-mailed
// link opened in this browser, or a passkey), the app page the person was
// going to.
const nextCookie = "agentpay_next"

// safeNext is next when it is a page of the app on this origin: a
// relative path under the prefix, never an absolute URL, a
// scheme-relative //host, a backslash (which browsers read as a slash) or
// a control character; "" otherwise.
func (h *handler) safeNext(next string) string {
	if next == "" || len(next) > 1024 || !strings.HasPrefix(next, h.cfg.Prefix+"/") ||
		strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\") {
		return ""
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return ""
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return ""
	}
	// The path cleaned must stay in the app (no /app/../elsewhere).
	if clean := path.Clean(u.Path); clean != h.cfg.Prefix && !strings.HasPrefix(clean+"/", h.cfg.Prefix+"/") {
		return ""
	}
	return next
}

// keepNext remembers a safe next for the sign-in; an unsafe one is
// dropped (the person lands where anyone does).
func (h *handler) keepNext(w http.ResponseWriter, next string) {
	if next = h.safeNext(next); next == "" {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: nextCookie, Value: url.QueryEscape(next), Path: h.cfg.Prefix, MaxAge: 3600,
		HttpOnly: true, Secure: h.cfg.SecureCookies, SameSite: http.SameSiteLaxMode})
}

// takeNext is where a sign-in goes: the page kept by keepNext (checked
// again), else the home page; the cookie is spent.
func (h *handler) takeNext(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(nextCookie)
	if err != nil {
		return h.cfg.Prefix + "/"
	}
	http.SetCookie(w, &http.Cookie{Name: nextCookie, Value: "", Path: h.cfg.Prefix, MaxAge: -1,
		HttpOnly: true, Secure: h.cfg.SecureCookies, SameSite: http.SameSiteLaxMode})
	next, err := url.QueryUnescape(c.Value)
	if next = h.safeNext(next); err != nil || next == "" {
		return h.cfg.Prefix + "/"
	}
	return next
}

// signUpMerchant signs a merchant up for the signed-in person
// (agentpay.SignUpMerchant) and answers its keys, this once, as JSON:
// {"merchant_id", "name", "email", "keys": {...}, "warning", "dashboard"}.
func (h *handler) signUpMerchant(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.failJSON(w, r, agentpay.Invalid("form", "is not a valid form"))
		return
	}
	v := h.viewer(r)
	if v == nil {
		h.failJSON(w, r, agentpay.ErrNotSignedIn)
		return
	}
	if err := v.CheckCSRF(r.PostFormValue("csrf_token")); err != nil {
		h.failJSON(w, r, err)
		return
	}
	// Counted as a registration of the client IP, as the API's is.
	if _, err := h.cfg.Service.AllowIP(r.Context(), httpx.ClientIP(r, h.cfg.TrustedProxies), agentpay.RateRegistration); err != nil {
		h.failJSON(w, r, err)
		return
	}
	reg, err := h.cfg.Service.SignUpMerchant(r.Context(), v, agentpay.MerchantSignup{
		Name: r.PostFormValue("name"), Email: r.PostFormValue("email"),
		SettlementAddress: r.PostFormValue("settlement_address"), SettlementChain: r.PostFormValue("settlement_chain"),
	})
	if err != nil {
		h.failJSON(w, r, err)
		return
	}
	k := reg.Keys
	h.writeJSON(w, http.StatusCreated, map[string]any{
		"merchant_id": reg.Merchant.ID, "name": reg.Merchant.Name, "email": reg.Merchant.Email,
		"keys": map[string]string{
			"live_public_key": k.LivePublicKey, "live_secret_key": k.LiveSecretKey,
			"test_public_key": k.TestPublicKey, "test_secret_key": k.TestSecretKey,
			"webhook_secret": k.WebhookSecret, "test_webhook_secret": k.TestWebhookSecret,
		},
		"warning":   agentpay.MerchantKeysWarning,
		"dashboard": h.cfg.Prefix + "/dashboard?merchant=" + reg.Merchant.ID.String(),
	})
}

func (h *handler) requestSignIn(w http.ResponseWriter, r *http.Request) {
	p := page{FormToken: h.formToken(w, r)}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "signin.html", p, err)
		return
	}
	p.Email = r.PostFormValue("email")
	ip := httpx.ClientIP(r, h.cfg.TrustedProxies)
	if err := h.cfg.Service.RequestSignIn(r.Context(), p.Email, ip); err != nil {
		h.fail(w, r, "signin.html", p, err)
		return
	}
	h.render(w, http.StatusOK, "sent.html", p)
}

func (h *handler) signInLink(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	link, err := h.cfg.Service.CheckSignInLink(r.Context(), token)
	if err != nil {
		h.fail(w, r, "link.html", p, err)
		return
	}
	p.Email, p.NewAccount = link.Email, link.NewAccount
	h.render(w, http.StatusOK, "link.html", p)
}

func (h *handler) completeSignIn(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "link.html", p, err)
		return
	}
	var newUser *agentpay.NewUser
	if name := r.PostFormValue("username"); name != "" {
		newUser = &agentpay.NewUser{Username: name, DisplayName: r.PostFormValue("display_name")}
		p.NewAccount, p.Username = true, name
	}
	in, err := h.cfg.Service.CompleteSignIn(r.Context(), token, newUser, r.UserAgent())
	if err != nil {
		if link, lerr := h.cfg.Service.CheckSignInLink(r.Context(), token); lerr == nil {
			p.Email, p.NewAccount = link.Email, link.NewAccount
		}
		h.fail(w, r, "link.html", p, err)
		return
	}
	h.setSession(w, in)
	http.Redirect(w, r, h.takeNext(w, r), http.StatusSeeOther)
}

func (h *handler) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	_ = r.ParseForm()
	v := h.viewer(r)
	if v == nil {
		http.Redirect(w, r, h.cfg.Prefix+"/signin", http.StatusSeeOther)
		return
	}
	if err := v.CheckCSRF(r.PostFormValue("csrf_token")); err != nil {
		h.fail(w, r, "signin.html", page{FormToken: h.formToken(w, r)}, err)
		return
	}
	if err := h.cfg.Service.SignOut(r.Context(), v, r.PostFormValue("everywhere") == "1"); err != nil {
		h.fail(w, r, "signin.html", page{FormToken: h.formToken(w, r)}, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: httpx.SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: h.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, Expires: time.Unix(0, 0)})
	// The sign-in page says it was done (item 12: every action says what
	// it did), and where: this browser or every one.
	done := "here"
	if r.PostFormValue("everywhere") == "1" {
		done = "everywhere"
	}
	http.Redirect(w, r, h.cfg.Prefix+"/signin?signed_out="+done, http.StatusSeeOther)
}

func (h *handler) invitation(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	info, err := h.cfg.Service.Invitation(r.Context(), token)
	if err != nil {
		h.fail(w, r, "invite.html", p, err)
		return
	}
	p.AgentUsername, p.Email, p.Reference = info.Agent.Username, info.Email(), info.Reference
	if v := h.viewer(r); v != nil {
		p.SignedIn, p.CSRF, p.Username = true, v.CSRFToken(), v.User.Username
	}
	h.render(w, http.StatusOK, "invite.html", p)
}

// acceptInvitation signs a person up with an e-mailed invitation's address
// and accepts it (a signed-in person accepts through GraphQL's
// acceptInvitation from the same page).
func (h *handler) acceptInvitation(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "invite.html", p, err)
		return
	}
	info, err := h.cfg.Service.Invitation(r.Context(), token)
	if err != nil {
		h.fail(w, r, "invite.html", p, err)
		return
	}
	p.AgentUsername, p.Email, p.Reference, p.Username = info.Agent.Username, info.Email(), info.Reference, r.PostFormValue("username")
	in := agentpay.NewUser{Username: p.Username, DisplayName: r.PostFormValue("display_name")}
	signIn, _, err := h.cfg.Service.SignUpByInvitation(r.Context(), token, in, r.UserAgent())
	if err != nil {
		h.fail(w, r, "invite.html", p, err)
		return
	}
	h.setSession(w, signIn)
	http.Redirect(w, r, h.cfg.Prefix+"/", http.StatusSeeOther)
}

// declineInvitation declines an e-mailed invitation from its page: the
// agent can no longer mail the address.
func (h *handler) declineInvitation(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "invite.html", p, err)
		return
	}
	info, err := h.cfg.Service.DeclineInvitation(r.Context(), token)
	if err != nil {
		h.fail(w, r, "invite.html", p, err)
		return
	}
	p.AgentUsername, p.Email, p.Done = info.Agent.Username, info.Email(), true
	h.render(w, http.StatusOK, "invite.html", p)
}

// unsubscribeLink shows an unsubscribe link's page (GET only reads it: a
// mail scanner opening it unsubscribes nobody).
func (h *handler) unsubscribeLink(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	link, err := h.cfg.Service.CheckUnsubscribeLink(r.Context(), token)
	if err != nil {
		h.fail(w, r, "unsubscribe.html", p, err)
		return
	}
	p.Email, p.Done = link.Email, link.Unsubscribed
	h.render(w, http.StatusOK, "unsubscribe.html", p)
}

func (h *handler) unsubscribe(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "unsubscribe.html", p, err)
		return
	}
	link, err := h.cfg.Service.Unsubscribe(r.Context(), token)
	if err != nil {
		h.fail(w, r, "unsubscribe.html", p, err)
		return
	}
	p.Email, p.Done = link.Email, true
	h.render(w, http.StatusOK, "unsubscribe.html", p)
}

// merchantEmailLink shows a merchant contact e-mail's confirmation page
// (GET only reads it, as a sign-in link's page does).
func (h *handler) merchantEmailLink(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	link, err := h.cfg.Service.CheckMerchantEmailLink(r.Context(), token)
	if err != nil {
		h.fail(w, r, "confirm.html", p, err)
		return
	}
	p.Email, p.MerchantName = link.Email, link.MerchantName
	h.render(w, http.StatusOK, "confirm.html", p)
}

func (h *handler) confirmMerchantEmail(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "confirm.html", p, err)
		return
	}
	link, err := h.cfg.Service.ConfirmMerchantEmail(r.Context(), token)
	if err != nil {
		h.fail(w, r, "confirm.html", p, err)
		return
	}
	p.Email, p.MerchantName, p.Done = link.Email, link.MerchantName, true
	h.render(w, http.StatusOK, "confirm.html", p)
}

// stepUpLink shows what an e-mailed confirmation link confirms; only its
// form (POST) confirms it, so a mail scanner opening it confirms nothing.
func (h *handler) stepUpLink(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	link, err := h.cfg.Service.CheckStepUpLink(r.Context(), token)
	if err != nil {
		h.fail(w, r, "stepup.html", p, err)
		return
	}
	p.Summary = link.Summary
	h.render(w, http.StatusOK, "stepup.html", p)
}

// confirmStepUp follows the link: the step-up is confirmed, and the page
// that asked for it (in any browser the person is signed in on) goes on.
func (h *handler) confirmStepUp(w http.ResponseWriter, r *http.Request) {
	token := chi.URLParam(r, "token")
	p := page{FormToken: h.formToken(w, r), Token: token}
	if err := h.checkForm(w, r); err != nil {
		h.fail(w, r, "stepup.html", p, err)
		return
	}
	link, err := h.cfg.Service.ConfirmStepUpLink(r.Context(), token)
	if err != nil {
		h.fail(w, r, "stepup.html", p, err)
		return
	}
	p.Summary, p.Confirmed = link.Summary, true
	h.render(w, http.StatusOK, "stepup.html", p)
}
