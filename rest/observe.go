package rest

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"agentpay/internal/logctx"
)

// HTTPObserver is told of every answered request (internal/metrics
// implements it). route is the router's pattern ("/checkout/sessions/{id}",
// "/pay/*"), never the raw path: a label must not hold ids, and a client
// must not be able to make new series; "unmatched" for a 404 on no route.
type HTTPObserver interface {
	HTTPRequest(route, method string, status int, took time.Duration)
}

// observe puts the request id on every log line of the request (logctx),
// logs the request once answered and tells the observer. The line is at
// debug level for a success, info for a client error and warn for a server
// error: a busy API's every request at info would drown the rest.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r = r.WithContext(logctx.With(r.Context(), slog.String("request_id", middleware.GetReqID(r.Context()))))
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			// Also when the handler panics with http.ErrAbortHandler (the
			// recoverer lets it through): the request still ended.
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
				route = rc.RoutePattern()
			}
			method := methodLabel(r.Method)
			took := time.Since(start)
			if s.observer != nil {
				s.observer.HTTPRequest(route, method, status, took)
			}
			level := slog.LevelDebug
			switch {
			case status >= 500:
				level = slog.LevelWarn
			case status >= 400:
				level = slog.LevelInfo
			}
			s.logger.LogAttrs(r.Context(), level, "request", slog.String("method", method), slog.String("route", route),
				slog.Int("status", status), slog.Float64("duration_ms", float64(took.Microseconds())/1000))
		}()
		next.ServeHTTP(ww, r)
	})
}

// methodLabel is the request's method when it is one of HTTP's, else
// "other": the method comes from the client, and each new label value is a
// new series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}
