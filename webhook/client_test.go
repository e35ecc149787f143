package webhook

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIsPublicAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ip     string
		public bool
	}{
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:4700:4700::1111", true},
		{"127.0.0.1", false},
		{"127.255.0.9", false},
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"172.32.0.1", true},
		{"192.168.0.1", false},
		{"100.64.0.1", false},
		{"169.254.169.254", false},
		{"0.0.0.0", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"::1", false},
		{"::", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:8.8.8.8", true},
		{"fe80::1", false},
		{"fd12:3456::1", false},
		{"64:ff9b::a00:1", false},
		{"2002:a00:1::1", false},
		{"ff02::1", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.public, IsPublicAddr(netip.MustParseAddr(tt.ip)), tt.ip)
	}
}

func TestCheckPublicHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		err  string // "" = may be public
	}{
		{"shop.example.com", ""},
		{"93.184.216.34", ""},
		{"2606:4700:4700::1111", ""},
		{"localhost.example.com", ""},
		{"localhost", "localhost"},
		{"LOCALHOST.", "localhost"},
		{"api.localhost", "localhost"},
		{"127.0.0.1", "not public"},
		{"10.1.2.3", "not public"},
		{"169.254.169.254", "not public"},
		{"::1", "not public"},
		{"::ffff:127.0.0.1", "not public"},
		{"fd00::1", "not public"},
		{"fe80::1%eth0", "not public"},
		{"0.0.0.0", "not public"},
	}
	for _, tt := range tests {
		err := CheckPublicHost(tt.host)
		var refused *NonPublicAddrError
		switch tt.err {
		case "":
			require.NoError(t, err, tt.host)
		case "localhost":
			require.ErrorIs(t, err, ErrLocalhost, tt.host)
		default:
			require.True(t, errors.As(err, &refused), "%s: %v", tt.host, err)
			require.False(t, IsPublicAddr(refused.Addr), tt.host)
		}
	}
}

// TestClientAddressRule: a PublicOnly client refuses a loopback receiver
// when it connects, whether the URL names the address or a name resolving
// to it; the other client reaches it.
func TestClientAddressRule(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	open := NewClient(ClientOptions{Timeout: 5 * time.Second})
	public := NewClient(ClientOptions{Timeout: 5 * time.Second, PublicOnly: true})

	for _, url := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		resp, err := open.Post(url, "application/json", strings.NewReader("{}"))
		require.NoError(t, err, url)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)

		_, err = public.Post(url, "application/json", strings.NewReader("{}"))
		var refused *NonPublicAddrError
		require.True(t, errors.As(err, &refused), "%s: %v", url, err)
		require.True(t, refused.Addr.IsLoopback(), refused.Addr)
	}
	require.Equal(t, int32(2), hits.Load(), "only the open client's requests arrived")
}

// TestClientDoesNotFollowRedirects: a 3xx is the answer, whatever the
// Location says.
func TestClientDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		t.Errorf("followed to %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	resp, err := NewClient(ClientOptions{Timeout: 5 * time.Second}).Post(srv.URL+"/moved", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	_, err := NewClient(ClientOptions{Timeout: 50 * time.Millisecond}).Post(srv.URL, "application/json", strings.NewReader("{}"))
	require.ErrorContains(t, err, "Client.Timeout exceeded")
}

// TestClientBoundsAnswerHeaders: an answer whose headers pass
// MaxResponseHeaderBytes fails the request; one just under it is read.
func TestClientBoundsAnswerHeaders(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Padding", strings.Repeat("a", n))
	}))
	t.Cleanup(srv.Close)
	client := NewClient(ClientOptions{Timeout: 5 * time.Second})

	resp, err := client.Post(srv.URL+"?n="+strconv.Itoa(MaxResponseHeaderBytes-1024), "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = client.Post(srv.URL+"?n="+strconv.Itoa(MaxResponseHeaderBytes+1), "application/json", strings.NewReader("{}"))
	require.ErrorContains(t, err, "server response headers exceeded")
}
