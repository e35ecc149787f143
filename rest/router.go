// Package rest is the REST facade: the spec's exact paths over chi, each
// handler decoding a request, calling the service layer and writing the
// answer with the spec's JSON names.
package rest

import (
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"

	"github.com/go-chi/chi/v5"

	"agentpay"
	"agentpay/internal/httpx"
)

// Config wires the facade.
type Config struct {
	Service *agentpay.Service
	Logger  *slog.Logger
	// Dev mounts the dev-only routes (/dev/faucet, /dev/chains, /dev/mail,
	// /dev/partner/...).
	Dev bool
	// Mounts are other handlers served under exact paths (GraphQL, the
	// playground); the caller builds them so this package stays REST.
	Mounts map[string]http.Handler
	// Pages is the hosted checkout page (package web), served under /pay
	// ({pay_url}/pay/<external_id>) with the per-IP limit of
	// unauthenticated requests; nil serves no pages.
	Pages http.Handler
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client (httpx.ClientIP); none: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// Observer is told of every answered request (metrics); nil: none.
	Observer HTTPObserver
}

type server struct {
	svc      *agentpay.Service
	logger   *slog.Logger
	proxies  []netip.Prefix
	observer HTTPObserver
}

// NewRouter builds the HTTP handler of the whole API.
func NewRouter(cfg Config) http.Handler {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &server{svc: cfg.Service, logger: logger, proxies: cfg.TrustedProxies, observer: cfg.Observer}

	r := s.newMux()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusNotFound, "not found")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusMethodNotAllowed, "method not allowed")
	})

	r.Get("/healthz", s.healthz)
	// Readiness costs a database ping: limited per client IP, per process
	// (the process is what it answers for).
	r.With(s.limitIP(agentpay.RateProbe)).Get("/readyz", s.readyz)
	r.Get("/openapi.json", s.openAPI)

	r.Route("/agents", func(r chi.Router) {
		r.Group(func(r chi.Router) {
			r.Use(s.limitIP(agentpay.RateRequest))
			r.With(s.limitIP(agentpay.RateRegistration)).Post("/quick-register", s.quickRegister)
			r.With(s.limitIP(agentpay.RateRegistration)).Post("/register", s.register)
			r.Get("/signature-message", s.signatureMessage)
			r.Get("/leaderboard", s.leaderboard)
			r.Get("/stats", s.stats)
			r.Get("/treasury", s.treasury)
			r.Get("/check-username/{username}", s.checkUsername)
			r.Get("/by-username/{username}", s.agentByUsername)
			r.Get("/{agent_id}", s.agentByID)
		})
		r.Route("/me", func(r chi.Router) {
			r.Use(s.requireAgent)
			r.Get("/profile", s.myProfile)
			r.Get("/limits", s.myLimits)
			r.Get("/wallets", s.myWallets)
			r.Get("/wallet/balance", s.myBalance)
			r.Post("/wallet/send", s.send)
			r.Post("/wallet/send-to-user", s.sendToUser)
			r.Post("/invite-human", s.inviteHuman)
			r.Post("/pairings/request", s.requestPairing)
			r.Get("/pairings", s.myPairings)
			r.Post("/pairings/{pairing_id}/revoke", s.revokePairing)
			r.Post("/pairings/card/request-purchase", s.requestCardPurchase)
			r.Get("/pairings/card/requests", s.myCardRequests)
			r.Get("/pairings/card/requests/{request_id}", s.myCardRequest)
			r.Get("/events", s.myEvents)
			r.Get("/approvals/{approval_id}", s.myApproval)
			r.Post("/wallets/verify", s.verifyWallet)
			r.Post("/verify-partner", s.verifyPartner)
			r.Post("/regenerate-api-key", s.regenerateAPIKey)
		})
	})
	// Identity providers' callbacks: unauthenticated (the signature is the
	// provider's credential), so counted per client IP.
	r.With(s.limitIP(agentpay.RateRequest)).Post("/identity/callbacks/{provider}", s.identityCallback)
	r.Route("/checkout", func(r chi.Router) {
		s.mountMerchantRoutes(r)
		s.mountCheckoutPageRoutes(r)
	})
	if cfg.Pages != nil {
		// x402 clients asking the hosted page's address get the session's
		// 402 instead (x402.go).
		r.With(s.limitIP(agentpay.RateRequest)).Mount("/pay", s.x402Pages(cfg.Pages))
	}
	s.mountX402Facilitator(r)
	// ACP 2026-04-17 seller facade over checkout sessions (acp.go).
	s.mountACPRoutes(r)
	for path, h := range cfg.Mounts {
		r.Handle(path, h)
	}
	if cfg.Dev {
		r.Post("/dev/faucet", s.devFaucet)
		r.Get("/dev/chains", s.devChains)
		r.Get("/dev/mail", s.devMail)
		r.Post("/dev/partner/attest", s.devPartnerAttest)
		r.Get("/dev/partner/jwks.json", s.devPartnerJWKS)
		r.Post("/dev/card/charge", s.devCardCharge)
	}
	return r
}

// newMux is a router with the middleware every request passes (request
// id with logging and metrics, panic recovery, the body bound): the API's, and
// BenchmarkMeProfile's baseline with the same middleware shape.
func (s *server) newMux() *chi.Mux {
	r := chi.NewRouter()
	r.Use(s.observe) // also names the request (request id)
	r.Use(s.recoverer)
	r.Use(limitBody)
	return r
}

// limitBody caps every request body the router serves, the mounted
// handlers' (GraphQL, the pages) included, at httpx.MaxBodyBytes: a body
// declared larger is refused at once (413), one that turns out larger
// fails when read (decodeJSON answers 413).
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpx.LimitBody(w, r) {
			writeDetail(w, http.StatusRequestEntityTooLarge, httpx.ErrBodyTooLarge.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into 500 {"detail":"internal error"} and logs it
// with the request id so the answer can be traced.
func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			// (The request id comes with the context: observe.)
			s.logger.ErrorContext(r.Context(), "panic",
				"method", r.Method, "path", r.URL.Path, "panic", rec, "stack", string(debug.Stack()))
			writeDetail(w, http.StatusInternalServerError, "internal error")
		}()
		next.ServeHTTP(w, r)
	})
}
