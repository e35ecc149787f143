package rest

import (
	"context"
	"net/http"

	"agentpay/ent"
	"agentpay/internal/httpx"
)

type agentCtxKey struct{}

// agentFrom returns the agent authenticated by requireAgent.
func agentFrom(ctx context.Context) *ent.Agent {
	a, _ := ctx.Value(agentCtxKey{}).(*ent.Agent)
	return a
}

// requireAgent authenticates X-Agent-Key, then applies the agent's rate
// limit (one statement on PostgreSQL, see AuthenticateAndAllow); every
// authenticated answer, refused or not, carries the X-RateLimit-* headers.
// The agent in the context comes with its wallets (see Authenticate).
func (s *server) requireAgent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent, dec, err := s.svc.AuthenticateAndAllow(r.Context(), r.Header.Get(httpx.AgentKeyHeader))
		if agent == nil {
			writeError(w, r, s.logger, areaAgent, err)
			return
		}
		httpx.ShowRate(w.Header(), dec, true)
		if err != nil {
			writeError(w, r, s.logger, areaAgent, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), agentCtxKey{}, agent)))
	})
}
