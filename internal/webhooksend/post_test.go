package webhooksend

import (
	"net"
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
