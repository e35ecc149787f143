package httpx

import (
	"net/http"
	"net/http/httptest"
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
	tests := []struct{ remote, forwarded, want string }{
		{"192.0.2.1:5555", "", "192.0.2.1"},
		{"[2001:db8::1]:443", "", "2001:db8::1"},
		// X-Forwarded-For is not trusted: anyone can send it.
		{"192.0.2.1:5555", "198.51.100.9", "192.0.2.1"},
		{"@", "", "@"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		if tt.forwarded != "" {
			r.Header.Set("X-Forwarded-For", tt.forwarded)
		}
		require.Equal(t, tt.want, ClientIP(r), tt.remote)
	}
}
