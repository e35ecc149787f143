package redact

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"http://127.0.0.1:8545", "http://127.0.0.1:8545"},
		{"https://mainnet.base.org/", "https://mainnet.base.org/"},
		{"https://base-mainnet.g.alchemy.com/v2/Xy9fAkq3pL0s2d8fGhJkLmN0pQrStUvW", "https://base-mainnet.g.alchemy.com/v2/***"},
		{"https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef", "https://mainnet.infura.io/v3/***"},
		{"https://rpc.ankr.com/eth/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "https://rpc.ankr.com/eth/***"},
		{"https://name.quiknode.pro/abc0123456789def/", "https://name.quiknode.pro/***/"},
		{"https://eth-mainnet.blastapi.io/4b4a3e05-2f57-4d3c-9f0b-d2f5a3c7e1aa", "https://eth-mainnet.blastapi.io/***"},
		{"https://mainnet.helius-rpc.com/?api-key=7f1c2d3e-aaaa-bbbb-cccc-0123456789ab", "https://mainnet.helius-rpc.com/?api-key=***"},
		{"https://lb.drpc.org/ogrpc?network=ethereum&dkey=AbCdEf123", "https://lb.drpc.org/ogrpc?network=***&dkey=***"},
		{"http://user:pass@127.0.0.1:9/v2/SECRETKEY?api-key=SECRET", "http://***@127.0.0.1:9/v2/***?api-key=***"},
		{"wss://user@node.example/ws/v1", "wss://***@node.example/ws/v1"},
		{"https://node.example/solana/mainnet-beta#frag", "https://node.example/solana/mainnet-beta"},
		{"https://node.example/p?a=1;apiKey=2&x9y8z7w6=3", "https://node.example/p?a=***&apiKey=***&***=***"},
		{"https://node.example/?", "https://node.example/?"},
		{"https://[::1]:8545/rpc", "https://[::1]:8545/rpc"},
		{"http://[::1", Mask},
		{"mailto:someone@example.com", Mask},
		{"postgres://app:hunter2@db:5432/agentpay?sslmode=disable", "postgres://***@db:5432/agentpay?sslmode=***"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, URL(tt.in), tt.in)
	}
}

// TestHTTPClient: the client reaches the real endpoint with every
// credential, while the URL the library holds and every error it can build
// carry none of them.
func TestHTTPClient(t *testing.T) {
	t.Parallel()
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(r.Context())
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	raw := strings.Replace(srv.URL, "http://", "http://alice:S3cretPass@", 1) + "/v2/PathKey0123456789?api-key=QueryKey0123"
	dial, client, err := HTTPClient(raw, nil)
	require.NoError(t, err)
	requireNoSecret(t, dial)

	resp, err := client.Post(dial, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/v2/PathKey0123456789", got.URL.Path)
	require.Equal(t, "QueryKey0123", got.URL.Query().Get("api-key"))
	user, pass, ok := got.BasicAuth()
	require.True(t, ok)
	require.Equal(t, "alice", user)
	require.Equal(t, "S3cretPass", pass)

	// A dead endpoint: the error names the dial URL only.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://alice:S3cretPass@" + ln.Addr().String() + "/v2/PathKey0123456789?api-key=QueryKey0123"
	require.NoError(t, ln.Close())
	dial, client, err = HTTPClient(dead, nil)
	require.NoError(t, err)
	_, err = client.Post(dial, "application/json", strings.NewReader(`{}`))
	require.Error(t, err)
	requireNoSecret(t, err.Error())
	require.Contains(t, err.Error(), ln.Addr().String(), "the endpoint stays identifiable")
}

// TestHTTPClientNoRedirect: a redirect is answered, not followed, so the
// credentials go nowhere but the configured endpoint.
func TestHTTPClientNoRedirect(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	dial, client, err := HTTPClient(srv.URL+"/v2/PathKey0123456789", nil)
	require.NoError(t, err)
	resp, err := client.Post(dial, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
}

func requireNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range []string{"alice", "S3cretPass", "PathKey0123456789", "QueryKey0123"} {
		require.NotContains(t, s, secret)
	}
}

// TestError: a database driver's errors quote the URL they were given,
// password included, even for a URL that does not parse.
func TestError(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, msg, want string }{
		{"postgres://app:hunter2Secret@db:5432/agentpay", `parse "postgres://app:hunter2Secret@db:5432/agentpay": bad`, `parse "postgres://***@db:5432/agentpay": bad`},
		{"postgres://app:hunter2 Secret@db:5432/agentpay", `parse "postgres://app:hunter2 Secret@db:5432/agentpay": net/url: invalid userinfo`, `parse "***": net/url: invalid userinfo`},
		{"postgres://app:hunter2Secret@[::1/db", `connecting: password hunter2Secret refused for app:hunter2Secret`, `connecting: password *** refused for ***`},
		{"http://u:p@h/v2/PathKey0123456789?api-key=QueryKey0123", `dial: PathKey0123456789 and QueryKey0123`, `dial: *** and ***`},
		{"postgres://app@db/agentpay", `connection refused`, `connection refused`},
	}
	for _, tt := range tests {
		base := errors.New(tt.msg)
		err := Error(base, tt.raw)
		require.Equal(t, tt.want, err.Error(), tt.raw)
		require.ErrorIs(t, err, base)
	}
	require.NoError(t, Error(nil, "postgres://a:b@c/d"))
}
