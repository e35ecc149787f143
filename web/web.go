// Package web serves the hosted checkout page (spec 4.4): server-rendered
// HTML for {pay_url}/pay/<external_id> and its iframe variant
// /pay/<external_id>/embed, the payment QR code as SVG, the page's
// JavaScript and the stylesheet it shares with the app (internal/uikit,
// at /assets/ui.css), all embedded in the binary (no CDN).
//
// The handlers read the service layer only (Service.CheckoutPage). The
// page's script talks to the checkout page API on the same origin:
// POST /checkout/pay/{id}/select when the customer picks a chain; the
// sessionStatus subscription (GraphQL over a websocket) for live status,
// and GET /checkout/pay/{id}/status every 3 seconds while it is down (and
// while confirming: the subscription sends status changes, not each
// confirmation). Each state (agentpay.ProgressOf) has its own view, rendered here
// for the first paint and switched by the script on each update.
package web

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/uikit"
	"agentpay/internal/vault"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures the pages handler.
type Config struct {
	Service *agentpay.Service
	Logger  *slog.Logger
	// Prefix is where the handler is mounted ("/pay" when empty); the pages
	// link their assets and each other under it.
	Prefix string
	// APIPrefix is the checkout page API the script calls
	// ("/checkout/pay" when empty).
	APIPrefix string
	// GraphQLPath is the GraphQL endpoint on the same origin whose
	// websocket (graphql-transport-ws) serves the sessionStatus
	// subscription; the page then polls only while the subscription is
	// down. Empty: the page polls only.
	GraphQLPath string
}

type handler struct {
	svc       *agentpay.Service
	logger    *slog.Logger
	prefix    string
	apiPrefix string
	graphql   string
	tmpl      *template.Template
}

// NewHandler answers the pages, to be mounted at cfg.Prefix ("/pay"):
//
//	GET /{external_id}         the checkout page
//	GET /{external_id}/embed   the same without outer chrome, for iframes
//	GET /{external_id}/qr.svg  the QR code of the selected chain's payment
//	                           URI (?chain= must name the selected chain)
//	GET /assets/ui.css         the shared stylesheet (internal/uikit)
//	GET /assets/*              JavaScript and the favicon
func NewHandler(cfg Config) http.Handler {
	h := &handler{
		svc:       cfg.Service,
		logger:    cfg.Logger,
		prefix:    strings.TrimRight(cfg.Prefix, "/"),
		apiPrefix: strings.TrimRight(cfg.APIPrefix, "/"),
		graphql:   cfg.GraphQLPath,
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	if h.prefix == "" {
		h.prefix = "/pay"
	}
	if h.apiPrefix == "" {
		h.apiPrefix = "/checkout/pay"
	}
	h.tmpl = template.Must(template.New("").Funcs(template.FuncMap{
		"chainLabel": chainLabel,
	}).ParseFS(templateFS, "templates/*.html"))

	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { h.notFound(w, r) })
	// The stylesheet shared with the app and the dashboard (internal/uikit).
	r.Get(uikit.Path, uikit.Stylesheet)
	static, _ := fs.Sub(staticFS, "static")
	assets := http.StripPrefix(h.prefix+"/assets/", http.FileServer(http.FS(static)))
	r.Get("/assets/*", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		assets.ServeHTTP(w, r)
	})
	r.Get("/{external_id}", func(w http.ResponseWriter, r *http.Request) { h.page(w, r, false) })
	r.Get("/{external_id}/embed", func(w http.ResponseWriter, r *http.Request) { h.page(w, r, true) })
	r.Get("/{external_id}/qr.svg", h.qr)
	return r
}

// option is a chain button.
type option struct {
	Chain string
	Token string
	Label string
}

// deposit is what the page shows once a chain is selected.
type deposit struct {
	Chain       string
	Token       string
	Address     string
	AmountToken string
	BaseUnits   string
	Decimals    int32
	// PaymentURI is an ethereum: or solana: URI, which html/template would
	// otherwise refuse in an href.
	PaymentURI template.URL
	QR         template.HTML
	// Domain is the token's EIP-712 domain when a browser wallet may pay
	// (EVM): the script shows "Pay with browser wallet" only with it and
	// an EIP-1193 provider (window.ethereum).
	Domain *chains.TokenDomain
}

type pageData struct {
	Embed      bool
	ExternalID string
	Merchant   string
	Website    string
	BrandColor string
	// BrandText is the text on BrandColor and BrandLink the links' colour
	// on the card (agentpay.BrandColorsFor: at least 4.5:1 each).
	BrandText   string
	BrandLink   string
	Description string
	Amount      string
	Currency    string
	Status      string
	// State is the view the page shows (agentpay.ProgressOf): pending,
	// detecting, underpaid, confirming, confirmed, expired or cancelled.
	State string
	// PaidExact is amount_paid exact; Paid, Due and Excess (the service's
	// agentpay.PaymentProgress) are formatted for reading.
	PaidExact string
	Paid      string
	Due       string
	Excess    string
	Overpaid  bool
	// Confirmations of the payments so far, of Required (0: not known).
	Confirmations uint64
	Required      uint64
	// Waiting is true while the page waits for a payment (pending,
	// detecting, underpaid): the countdown runs and the deposit shows.
	Waiting bool
	// Open is true while a chain may still be chosen (CheckoutPage.Open).
	Open       bool
	Livemode   bool
	ExpiresAt  string
	Expires    string
	SuccessURL string
	CancelURL  string
	Options    []option
	Deposit    *deposit
	// Receipt lists the confirmed payments with their transactions.
	Receipt   []receiptLine
	Prefix    string
	APIPrefix string
	PagePath  string
	GraphQL   string
	// Nonce admits the page's one inline <style> (the brand colour).
	Nonce string
}

// receiptLine is one confirmed payment on the receipt.
type receiptLine struct {
	Amount, Token, Chain, TxHash, TxURL string
}

// defaultBrand is the page colour of a merchant without brand_color.
const defaultBrand = "#4f46e5"

func (h *handler) page(w http.ResponseWriter, r *http.Request, embed bool) {
	externalID := chi.URLParam(r, "external_id")
	p, err := h.svc.CheckoutPage(r.Context(), externalID, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	sess, m := p.Session, p.Merchant
	// The status answer the script polls: the first paint shows the same
	// amounts and confirmations as the live updates after it.
	st, err := h.svc.CheckoutStatus(r.Context(), externalID, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d := pageData{
		Embed:         embed,
		ExternalID:    sess.ExternalID,
		Merchant:      m.Name,
		Website:       safeURL(m.Website),
		BrandColor:    defaultBrand,
		Description:   sess.Description,
		Amount:        formatAmount(sess.AmountUsd),
		Currency:      sess.Currency,
		Status:        string(st.Status),
		State:         string(st.Progress.State),
		PaidExact:     st.AmountPaid.String(),
		Paid:          formatAmount(st.AmountPaid),
		Confirmations: st.Confirmations,
		Open:          p.Open,
		Livemode:      sess.Livemode,
		ExpiresAt:     sess.ExpiresAt.UTC().Format(time.RFC3339),
		Expires:       sess.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"),
		SuccessURL:    safeURL(p.SuccessURL),
		CancelURL:     safeURL(p.CancelURL),
		Prefix:        h.prefix,
		APIPrefix:     h.apiPrefix,
		PagePath:      h.prefix + "/" + sess.ExternalID,
		GraphQL:       h.graphql,
		Nonce:         vault.CSPNonce.New(),
	}
	for _, l := range p.Receipt {
		d.Receipt = append(d.Receipt, receiptLine{Amount: formatAmount(l.Amount), Token: l.Token, Chain: l.Chain, TxHash: l.TxHash, TxURL: safeURL(l.TxURL)})
	}
	d.Waiting = st.Progress.Waiting
	if st.Required != nil {
		d.Required = *st.Required
	}
	if st.Progress.Due.IsPositive() {
		d.Due = formatAmount(st.Progress.Due)
	}
	if st.Progress.Excess.IsPositive() {
		d.Overpaid = true
		d.Excess = formatAmount(st.Progress.Excess)
	}
	brand, err := agentpay.BrandColorsFor(m.BrandColor)
	if err != nil { // none set
		brand, _ = agentpay.BrandColorsFor(defaultBrand)
	}
	d.BrandColor, d.BrandText, d.BrandLink = brand.Background, brand.Text, brand.Link
	for _, o := range p.Options {
		d.Options = append(d.Options, option{Chain: string(o.Chain), Token: o.Token, Label: chainLabel(string(o.Chain))})
	}
	if dep := p.Deposit; dep != nil {
		svg, err := QRSVG(dep.PaymentURI)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		d.Deposit = &deposit{
			Chain:       string(dep.Chain),
			Token:       dep.Token,
			Address:     dep.Address,
			AmountToken: formatAmount(dep.AmountToken),
			BaseUnits:   dep.AmountUnits.String(),
			Decimals:    dep.Decimals,
			PaymentURI:  template.URL(dep.PaymentURI), // built by the service from addresses and numbers
			QR:          template.HTML(svg),           // built by QRSVG from numbers only
			Domain:      dep.TokenDomain,
		}
	}
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, "page.html", d); err != nil {
		h.fail(w, r, err)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	csp := "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-" + d.Nonce + "'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'"
	if embed {
		csp += "; frame-ancestors *"
	} else {
		csp += "; frame-ancestors 'none'"
		hdr.Set("X-Frame-Options", "DENY")
	}
	hdr.Set("Content-Security-Policy", csp)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// qr answers the QR code of the session's payment URI on the selected
// chain; 404 when no chain is selected or ?chain= names another one (the
// page asks after selecting).
func (h *handler) qr(w http.ResponseWriter, r *http.Request) {
	p, err := h.svc.CheckoutPage(r.Context(), chi.URLParam(r, "external_id"), "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	want := r.URL.Query().Get("chain")
	if p.Deposit == nil || (want != "" && !strings.EqualFold(want, string(p.Deposit.Chain))) {
		h.notFound(w, r)
		return
	}
	svg, err := QRSVG(p.Deposit.PaymentURI)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(svg))
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, agentpay.ErrNotFound) {
		h.notFound(w, r)
		return
	}
	h.logger.ErrorContext(r.Context(), "checkout page", "path", r.URL.Path, "err", err)
	h.errorPage(w, http.StatusInternalServerError, "Something went wrong", "The checkout page could not be shown. Please try again in a moment.")
}

func (h *handler) notFound(w http.ResponseWriter, _ *http.Request) {
	h.errorPage(w, http.StatusNotFound, "Checkout not found", "This payment link does not exist. Check the link you were given, or return to the shop.")
}

func (h *handler) errorPage(w http.ResponseWriter, status int, title, message string) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, "error.html", map[string]any{
		"Status": status, "Title": title, "Message": message, "Prefix": h.prefix,
	}); err != nil {
		http.Error(w, title, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// formatAmount writes at least two decimals (12.50), more when the amount
// has them.
func formatAmount(d decimal.Decimal) string {
	if d.Equal(d.Round(2)) {
		return d.StringFixed(2)
	}
	return d.String()
}

// safeURL keeps http(s) URLs only, so a merchant's URL cannot run script.
func safeURL(s string) string {
	l := strings.ToLower(strings.TrimSpace(s))
	if strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://") {
		return strings.TrimSpace(s)
	}
	return ""
}

var chainLabels = map[string]string{
	string(chains.Base):   "Base",
	string(chains.Solana): "Solana",
}

// chainLabel is the button text of a chain.
func chainLabel(c string) string {
	if l, ok := chainLabels[c]; ok {
		return l
	}
	if c == "" {
		return c
	}
	return strings.ToUpper(c[:1]) + c[1:]
}
