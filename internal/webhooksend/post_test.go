package webhooksend

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/webhook"
)

// TestWebhookSendErrors: what the attempt log says of a request that
// failed, and how long it took. Name resolution failures never show the
// resolver (an address inside the service's network) nor what a name
// resolved to, nor how long resolving took.
func TestWebhookSendErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err   error
		want  string
		timed bool // the duration is shown
	}{
		{&url.Error{Op: "Post", URL: "http://shop.test/hooks", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &webhook.NonPublicAddrError{Addr: netip.MustParseAddr("10.0.3.7")}}},
			"refused: the webhook URL's host does not resolve to a public address", false},
		{&url.Error{Op: "Post", URL: "http://db.internal/hooks", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "no such host", Name: "db.internal", Server: "10.0.0.2:53", IsNotFound: true}}},
			"refused: the webhook URL's host does not resolve to a public address", false},
		{&url.Error{Op: "Post", URL: "http://shop.test/hooks", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &net.DNSError{Err: "server misbehaving", Name: "shop.test", Server: "10.0.0.2:53", IsTemporary: true}}},
			"the webhook URL's host could not be resolved (temporary failure)", false},
		{&url.Error{Op: "Post", URL: "http://93.184.216.34/hooks", Err: &net.OpError{Op: "dial", Net: "tcp",
			Addr: &net.TCPAddr{IP: net.ParseIP("93.184.216.34"), Port: 80}, Err: syscall.ECONNREFUSED}},
			`Post "http://93.184.216.34/hooks": dial tcp 93.184.216.34:80: connection refused`, true},
	}
	for _, tt := range tests {
		err := SendError(tt.err)
		require.Equal(t, tt.want, err.Error())
		took := 1234 * time.Millisecond
		if !tt.timed {
			took = 0
		}
		require.Equal(t, took, Duration(err, 1234*time.Millisecond), tt.want)
	}
	require.Equal(t, 20*time.Millisecond, Duration(nil, 20*time.Millisecond), "a success")
}

// TestPostSigns: a try carries the headers its Request.Sign sets (each kind
// of webhook its own signature) over the post's own, and a receiver's non-2xx
// answer is a failed try with its status code.
func TestPostSigns(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	defer srv.Close()
	client := webhook.NewClient(webhook.ClientOptions{Timeout: 5 * time.Second})
	at := time.Unix(1_790_000_000, 0)
	payload := []byte(`{"type":"test"}`)

	code, err := Post(context.Background(), client, Request{URL: srv.URL, Payload: payload,
		Sign: StandardSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_1", at, payload)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	h := <-got
	require.Equal(t, "evt_1", h.Get("webhook-id"))
	require.Equal(t, "1790000000", h.Get("webhook-timestamp"))
	require.NotEmpty(t, h.Get("webhook-signature"))
	require.Equal(t, UserAgent, h.Get("User-Agent"))
	require.Equal(t, "application/json", h.Get("Content-Type"))

	code, err = Post(context.Background(), client, Request{URL: srv.URL, Payload: payload,
		Sign: func(h http.Header) { h.Set("Merchant-Signature", "t=1,v1=ab"); h.Set("X-Fail", "1") }})
	require.EqualError(t, err, "receiver answered 418 I'm a teapot")
	require.Equal(t, http.StatusTeapot, code)
	h = <-got
	require.Equal(t, "t=1,v1=ab", h.Get("Merchant-Signature"))
	require.Empty(t, h.Get("webhook-signature"))
}
