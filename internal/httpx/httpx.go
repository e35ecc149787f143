// Package httpx is what the HTTP facades (rest, graph, mcp, app) do the
// same way: who the client is (behind trusted proxies too), the headers its
// keys come in, the rate-limit headers, and the cap on request bodies; and
// the wire vocabulary REST, MCP and the app's pages share, so that they
// answer the same JSON from the same types: the status and detail of a
// service error (errors.go), amounts as exact JSON numbers (amount.go),
// the answer shapes (answers.go) and REST's words for the actions the
// rules' messages name (actions.go). It decides nothing of the business;
// the service does.
package httpx

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"agentpay/internal/ratelimit"
)

// The headers that carry a caller's keys, on REST and on GraphQL (where a
// websocket's connection_init payload may carry them too).
const (
	// SessionCookie carries a signed-in human's browser session token
	// (agentpay's sign-in); CSRFHeader the session's CSRF token, which
	// every request made with the cookie carries too.
	SessionCookie = "agentpay_session"
	CSRFHeader    = "X-CSRF-Token"
	// AgentKeyHeader carries an agent's API key.
	AgentKeyHeader = "X-Agent-Key"
	// MerchantKeyHeader carries a merchant's secret key (sk_live_/sk_test_).
	MerchantKeyHeader = "X-Checkout-Secret-Key"
	// DashboardSessionHeader carries a merchant dashboard session (ds_...),
	// the credential the dashboard's pages call the merchant API with.
	DashboardSessionHeader = "X-Dashboard-Session"
	// PublicKeyHeader carries a merchant's public key (pk_live_/pk_test_),
	// the checkout page's optional credential.
	PublicKeyHeader = "X-Checkout-Public-Key"
	// AdminKeyHeader carries the admin key (ADMIN_KEY) of admin queries.
	AdminKeyHeader = "X-Admin-Key"
)

// The headers of a money-moving POST's idempotency (agentpay's
// idempotency.go): the client's key, and the mark on an answer that is an
// earlier request's, replayed.
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// ClientIP is the address of the client a request comes from: the TCP
// peer's, unless the peer is one of the trusted proxies (TRUSTED_PROXIES),
// in which case X-Forwarded-For is read right to left, skipping trusted
// proxies, and the first address that is not one is the client. Only the
// entries our own proxies appended (the rightmost ones) are believed: any
// client can send X-Forwarded-For, so what lies left of the first untrusted
// address is never read, and a peer that is not a trusted proxy is never
// asked. An entry that is not an address stops the walk at the last trusted
// hop (a misconfigured proxy costs its own address, never a spoofed one).
// Without trusted proxies, or with none of them as the peer, it is the
// peer's address: behind an untrusted proxy every client shares its address.
func ClientIP(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	client, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	client = client.Unmap().WithZone("")
	if !inPrefixes(client, trusted) {
		return client.String()
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			break
		}
		client = hop
		if !inPrefixes(hop, trusted) {
			break
		}
	}
	return client.String()
}

// forwardedFor is every X-Forwarded-For entry, in order, across the
// header's lines (proxies may append a line rather than extend the last).
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, line := range h.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(line, ",")...)
	}
	return hops
}

// parseHop reads one X-Forwarded-For entry: an address, or an address with
// a port (some proxies write one).
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

func inPrefixes(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// MaxBodyBytes bounds every request body (REST, GraphQL, the pages) and
// every websocket message. The largest legitimate request, a session with
// 16 KB of metadata, is far below it; reading and decoding a full one costs
// milliseconds.
const MaxBodyBytes = 1 << 20

// ErrBodyTooLarge is the answer (413) to a body over MaxBodyBytes.
var ErrBodyTooLarge = fmt.Errorf("request body must be at most %d bytes", MaxBodyBytes)

// LimitBody caps r's body at MaxBodyBytes: reading past it fails with an
// *http.MaxBytesError (and the connection is closed after the answer). It
// reports whether the declared length is already over, so the caller can
// answer 413 without reading anything.
func LimitBody(w http.ResponseWriter, r *http.Request) (tooLarge bool) {
	if r.ContentLength > MaxBodyBytes {
		return true
	}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	}
	return false
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
