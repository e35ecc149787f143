package httpx

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/ratelimit"
)

func TestShowRate(t *testing.T) {
	t.Parallel()
	reset := time.Unix(1_900_000_020, 0)
	shown := http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"4"}, "X-Ratelimit-Reset": {"1900000020"}}
	tests := []struct {
		name    string
		before  http.Header
		dec     ratelimit.Decision
		replace bool
		want    http.Header
	}{
		{"no limit", nil, ratelimit.Decision{Allowed: true}, true, http.Header{}},
		{"allowed", nil, ratelimit.Decision{Allowed: true, Limit: 10, Remaining: 4, Reset: reset}, true, shown},
		{"refused rounds up", nil, ratelimit.Decision{Limit: 10, Reset: reset, RetryAfter: 1200 * time.Millisecond}, true, http.Header{
			"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1900000020"},
			"Retry-After": {"2"},
		}},
		{"refused at least a second", nil, ratelimit.Decision{Limit: 3, Reset: reset, RetryAfter: 0}, true, http.Header{
			"X-Ratelimit-Limit": {"3"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1900000020"},
			"Retry-After": {"1"},
		}},
		{"a tighter limit shown stays", shown, ratelimit.Decision{Allowed: true, Limit: 20, Remaining: 19, Reset: reset}, false, shown},
		{"a looser limit shown goes", shown, ratelimit.Decision{Allowed: true, Limit: 20, Remaining: 2, Reset: reset}, false, http.Header{
			"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"2"}, "X-Ratelimit-Reset": {"1900000020"},
		}},
		{"replaced whatever is shown", shown, ratelimit.Decision{Allowed: true, Limit: 20, Remaining: 19, Reset: reset}, true, http.Header{
			"X-Ratelimit-Limit": {"20"}, "X-Ratelimit-Remaining": {"19"}, "X-Ratelimit-Reset": {"1900000020"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.before.Clone()
			if h == nil {
				h = http.Header{}
			}
			ShowRate(h, tt.dec, tt.replace)
			require.Equal(t, tt.want, h)
		})
	}
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	tests := []struct {
		name      string
		remote    string
		forwarded []string // X-Forwarded-For lines
		trusted   []netip.Prefix
		want      string
	}{
		{"peer", "192.0.2.1:5555", nil, nil, "192.0.2.1"},
		{"IPv6 peer", "[2001:db8::1]:443", nil, nil, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:192.0.2.1]:443", nil, nil, "192.0.2.1"},
		{"no trusted proxies: the header is not read", "192.0.2.1:5555", []string{"198.51.100.9"}, nil, "192.0.2.1"},
		{"an untrusted peer's header is not read", "192.0.2.1:5555", []string{"198.51.100.9"}, proxies, "192.0.2.1"},
		{"behind a trusted proxy", "10.0.0.5:5555", []string{"198.51.100.9"}, proxies, "198.51.100.9"},
		{"a spoofed entry left of the client is never read", "10.0.0.5:5555", []string{"203.0.113.66, 198.51.100.9"}, proxies, "198.51.100.9"},
		{"several trusted hops are skipped", "10.0.0.5:5555", []string{"203.0.113.66, 198.51.100.9, 10.1.2.3, 10.9.9.9"}, proxies, "198.51.100.9"},
		{"lines joined in order", "10.0.0.5:5555", []string{"203.0.113.66", "198.51.100.9, 10.1.2.3"}, proxies, "198.51.100.9"},
		{"entry with a port", "10.0.0.5:5555", []string{"198.51.100.9:4711"}, proxies, "198.51.100.9"},
		{"IPv6 client through an IPv6 proxy", "[2001:db8:ffff::2]:443", []string{"[2001:db8:1::7]:80"}, proxies, "2001:db8:1::7"},
		{"garbage stops at the last trusted hop", "10.0.0.5:5555", []string{"198.51.100.9, unknown, 10.1.2.3"}, proxies, "10.1.2.3"},
		{"a trusted proxy without the header", "10.0.0.5:5555", nil, proxies, "10.0.0.5"},
		{"every hop trusted: the leftmost", "10.0.0.5:5555", []string{"10.3.3.3, 10.1.2.3"}, proxies, "10.3.3.3"},
		{"not an address", "@", nil, proxies, "@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for _, line := range tt.forwarded {
				r.Header.Add("X-Forwarded-For", line)
			}
			require.Equal(t, tt.want, ClientIP(r, tt.trusted))
		})
	}
}
