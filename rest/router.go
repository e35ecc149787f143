// Package rest is the REST facade: the spec's exact paths over chi, each
// handler decoding a request, calling the service layer and writing the
// answer with the spec's JSON names.
package rest

import (
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"agentpay"
)

// Config wires the facade.
type Config struct {
	Service *agentpay.Service
	Logger  *slog.Logger
	// Dev mounts the dev-only routes (/dev/faucet, /dev/chains).
	Dev bool
	// Mounts are other handlers served under exact paths (GraphQL, the
	// playground); the caller builds them so this package stays REST.
	Mounts map[string]http.Handler
}

type server struct {
	svc    *agentpay.Service
	logger *slog.Logger
}

// NewRouter builds the HTTP handler of the whole API.
func NewRouter(cfg Config) http.Handler {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &server{svc: cfg.Service, logger: logger}

	r := chi.NewRouter()
	r.Use(middleware.RequestID)
	r.Use(s.recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusNotFound, "not found")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeDetail(w, http.StatusMethodNotAllowed, "method not allowed")
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	for path, h := range cfg.Mounts {
		r.Handle(path, h)
	}
	if cfg.Dev {
		r.Post("/dev/faucet", s.devFaucet)
		r.Get("/dev/chains", s.devChains)
	}
	return r
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
			s.logger.ErrorContext(r.Context(), "panic", "request_id", middleware.GetReqID(r.Context()),
				"method", r.Method, "path", r.URL.Path, "panic", rec, "stack", string(debug.Stack()))
			writeDetail(w, http.StatusInternalServerError, "internal error")
		}()
		next.ServeHTTP(w, r)
	})
}
