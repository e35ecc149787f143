package rest

import (
	"net/http"

	"agentpay"
	"agentpay/internal/httpx"
)

// limitIP applies the service's per-client-IP limit of kind (the
// unauthenticated endpoints); a refusal is 429 with Retry-After. A limit
// inside another (registrations inside requests) shows only when it is the
// tighter one or refuses.
func (s *server) limitIP(kind agentpay.RateKind) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			dec, err := s.svc.AllowIP(r.Context(), httpx.ClientIP(r, s.proxies), kind)
			httpx.ShowRate(w.Header(), dec, err != nil)
			if err != nil {
				writeError(w, r, s.logger, areaAgent, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
