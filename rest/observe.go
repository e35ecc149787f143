package rest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
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

// observe names the request (its X-Request-Id, or the next id of this
// process, as chi's middleware.RequestID does, under its context key so
// middleware.GetReqID reads it), puts the id on every log line of the
// request (logctx), logs the request once answered and tells the observer.
// The line is at debug level for a success, info for a client error and
// warn for a server error: a busy API's every request at info would drown
// the rest. Naming and observing are one middleware, the request copied
// once with its context (issue 26: every request pays for the middleware,
// and the status poll's baseline has none).
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(middleware.RequestIDHeader)
		if id == "" {
			id = nextRequestID()
		}
		ctx := context.WithValue(r.Context(), middleware.RequestIDKey, id)
		r = r.WithContext(logctx.With(ctx, slog.String("request_id", id)))
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			// Also when the handler panics with http.ErrAbortHandler (the
			// recoverer lets it through): the request still ended.
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil {
				// Once: each call joins the patterns anew (4 allocations).
				if p := rc.RoutePattern(); p != "" {
					route = p
				}
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

// requestIDPrefix names this process's requests: the host and a random
// part, as chi's middleware.RequestID names them.
var requestIDPrefix = func() string {
	host, err := os.Hostname()
	if host == "" || err != nil {
		host = "localhost"
	}
	var buf [12]byte
	var b64 string
	for len(b64) < 10 {
		_, _ = rand.Read(buf[:])
		b64 = strings.NewReplacer("+", "", "/", "").Replace(base64.StdEncoding.EncodeToString(buf[:]))
	}
	return host + "/" + b64[:10]
}()

var requestSeq atomic.Uint64

// nextRequestID is the next id of this process: the prefix and a counter
// of at least six digits ("host/AbCdEfGhIj-000042"), chi's format, without
// fmt.
func nextRequestID() string { return formatRequestID(requestSeq.Add(1)) }

func formatRequestID(n uint64) string {
	b := make([]byte, 0, len(requestIDPrefix)+8)
	b = append(append(b, requestIDPrefix...), '-')
	for p := uint64(100000); p > 1 && n < p; p /= 10 {
		b = append(b, '0')
	}
	return string(strconv.AppendUint(b, n, 10))
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
