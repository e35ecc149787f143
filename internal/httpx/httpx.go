// Package httpx is what the HTTP facades (rest, graph) show the same way:
// who the client is, the headers its keys come in, and the rate-limit
// headers. It decides nothing; the service does.
package httpx

import (
	"net"
	"net/http"
	"strconv"

	"agentpay/internal/ratelimit"
)

// The headers that carry a caller's keys, on REST and on GraphQL (where a
// websocket's connection_init payload may carry them too).
const (
	// AgentKeyHeader carries an agent's API key.
	AgentKeyHeader = "X-Agent-Key"
	// MerchantKeyHeader carries a merchant's secret key (sk_live_/sk_test_).
	MerchantKeyHeader = "X-Checkout-Secret-Key"
	// PublicKeyHeader carries a merchant's public key (pk_live_/pk_test_),
	// the checkout page's optional credential.
	PublicKeyHeader = "X-Checkout-Public-Key"
)

// The headers of a money-moving POST's idempotency (agentpay's
// idempotency.go): the client's key, and the mark on an answer that is an
// earlier request's, replayed.
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// ClientIP is the address of the TCP peer. X-Forwarded-For and friends are
// not read: any client can set them, so trusting them would let one client
// pose as many. Behind a reverse proxy every client shares the proxy's
// address; honouring the proxy's header needs a configured trusted proxy,
// which there is not yet.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ShowRate shows a rate decision in h: X-RateLimit-Limit, -Remaining and
// -Reset (Unix seconds) whenever a limit applies, and Retry-After (seconds,
// rounded up) on a refusal. Unless replace, a decision leaving more
// requests than the one already shown (a wider limit's) is not shown.
func ShowRate(h http.Header, dec ratelimit.Decision, replace bool) {
	if dec.Limit <= 0 {
		return
	}
	if shown, err := strconv.Atoi(h.Get("X-RateLimit-Remaining")); !replace && err == nil && shown < dec.Remaining {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(dec.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(dec.Remaining, 0)))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(dec.Reset.Unix(), 10))
	if dec.Allowed {
		h.Del("Retry-After")
	} else {
		h.Set("Retry-After", strconv.FormatInt(dec.RetryAfterSeconds(), 10))
	}
}
