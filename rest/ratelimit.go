package rest

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"agentpay"
)

// limitIP applies the service's per-client-IP limit of kind (the
// unauthenticated endpoints); a refusal is 429 with Retry-After.
func (s *server) limitIP(kind agentpay.RateKind) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			dec, err := s.svc.AllowIP(r.Context(), clientIP(r), kind)
			if err != nil || !tighterShown(w, dec) {
				writeRateHeaders(w, dec)
			}
			if err != nil {
				writeError(w, r, s.logger, areaAgent, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// clientIP is the address of the TCP peer. X-Forwarded-For and friends are
// not read: any client can set them, so trusting them would let one client
// pose as many. Behind a reverse proxy every client shares the proxy's
// address; honouring the proxy's header needs a configured trusted proxy,
// which there is not yet.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tighterShown reports whether an earlier limit (the request limit around the
// registration limit) already shows fewer requests left than dec.
func tighterShown(w http.ResponseWriter, dec agentpay.RateDecision) bool {
	shown, err := strconv.Atoi(w.Header().Get("X-RateLimit-Remaining"))
	return err == nil && shown < dec.Remaining
}

// writeRateHeaders shows a rate decision: X-RateLimit-Limit, -Remaining and
// -Reset (Unix seconds) whenever a limit applies, and Retry-After (seconds,
// rounded up) on a refusal. A later call (a narrower limit) replaces them.
func writeRateHeaders(w http.ResponseWriter, dec agentpay.RateDecision) {
	if dec.Limit <= 0 {
		return
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(dec.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(dec.Remaining, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(dec.Reset.Unix(), 10))
	if !dec.Allowed {
		secs := int64((dec.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	} else {
		h.Del("Retry-After")
	}
}
