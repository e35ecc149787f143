package webhooksend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"agentpay/webhook"
)

const (
	// BodyMax is how much of an answer's body is read (and thrown away, so
	// the connection can be reused); the rest is not waited for.
	BodyMax = 64 << 10
	// UserAgent is the User-Agent of every try.
	UserAgent = "agentpay-webhooks/1"
)

// Request is one try to send.
type Request struct {
	URL     string
	Payload []byte
	// Sign sets the try's signing headers, called once the request is
	// built, just before it is sent: what differs between the kinds of
	// webhook (our Standard Webhooks signature, ACP's Merchant-Signature),
	// while the post, its client, the bounds on the answer and the errors
	// the attempt log shows are the same for every kind.
	Sign func(h http.Header)
}

// StandardSignature is Request.Sign of agentpay's own webhooks: Standard
// Webhooks headers (webhook.SetSignatureHeaders) of eventID's payload,
// dated at, signed with secret and with the secrets still in a rotation's
// overlap (previous).
func StandardSignature(secret, eventID string, at time.Time, payload []byte, previous ...string) func(http.Header) {
	return func(h http.Header) {
		webhook.SetSignatureHeaders(h, secret, eventID, at, payload, previous...)
	}
}

// Post sends one try with client, signed by r.Sign, and returns the
// answer's status code (0 when there was none) and why the try failed (nil
// for a 2xx), as the attempt log shows it (SendError).
func Post(ctx context.Context, client *http.Client, r Request) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Payload))
	if err != nil {
		return 0, fmt.Errorf("bad webhook URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if r.Sign != nil {
		r.Sign(req.Header)
	}

	resp, err := client.Do(req)
	if err != nil {
		return 0, SendError(err)
	}
	// Drain a little so the connection can be reused; the body is not kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, BodyMax))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// The attempt log's errors for a try that found no address to send to.
// They name no address: the log is the merchant's, and what a name resolves
// to inside the service's network, or which resolver answered, is not
// theirs to map.
var (
	ErrNoPublicAddress = errors.New("refused: the webhook URL's host does not resolve to a public address")
	ErrUnresolvedHost  = errors.New("the webhook URL's host could not be resolved (temporary failure)")
)

// SendError is the error a try's request failed with, as the attempt log
// shows it: a refused or unknown address is ErrNoPublicAddress, another
// name resolution failure ErrUnresolvedHost (Go's says which resolver
// failed, an internal address); anything else as net/http says it (it
// names the merchant's URL and what happened to it).
func SendError(err error) error {
	var refused *webhook.NonPublicAddrError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &refused):
		return ErrNoPublicAddress
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return ErrNoPublicAddress
	case errors.As(err, &dnsErr):
		return ErrUnresolvedHost
	}
	return err
}

// Duration is how long a try took as the attempt log shows it: 0 when it
// found no address to send to, since the time spent resolving the name
// would tell apart the names the service's resolver knows.
func Duration(sendErr error, took time.Duration) time.Duration {
	if errors.Is(sendErr, ErrNoPublicAddress) || errors.Is(sendErr, ErrUnresolvedHost) {
		return 0
	}
	return took
}
