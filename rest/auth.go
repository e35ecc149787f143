package rest

import (
	"context"
	"net/http"

	"agentpay/ent"
)

type agentCtxKey struct{}

// agentFrom returns the agent authenticated by requireAgent.
func agentFrom(ctx context.Context) *ent.Agent {
	a, _ := ctx.Value(agentCtxKey{}).(*ent.Agent)
	return a
}

// requireAgent authenticates X-Agent-Key, then applies the agent's rate
// limit; every authenticated answer, refused or not, carries the
// X-RateLimit-* headers.
func (s *server) requireAgent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent, err := s.svc.Authenticate(r.Context(), r.Header.Get("X-Agent-Key"))
		if err != nil {
			writeError(w, r, s.logger, areaAgent, err)
			return
		}
		dec, err := s.svc.AllowAgent(r.Context(), agent)
		writeRateHeaders(w, dec)
		if err != nil {
			writeError(w, r, s.logger, areaAgent, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), agentCtxKey{}, agent)))
	})
}
