package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The expected signatures below were computed apart from this package
// (Python's hmac), so a change of the wire format fails here.
const (
	testSecret = "whsec_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg"
	testBody   = `{"event":"payment.confirmed"}`
)

func TestSign(t *testing.T) {
	t.Parallel()

	require.Equal(t, "82f70ca89397d1a00709342b57653c03764b3135ec959ae196e194a48eac4f34", Sign(testSecret, []byte(testBody)))
	require.Equal(t, "v1,gjt2O9jUvXV1o517aWeda6w0J0vURIHVE/4vIPHrf5Q=", SignStandard(testSecret, "msg_1", 1700000000, []byte(testBody)))
}

func TestVerify(t *testing.T) {
	t.Parallel()

	body := []byte(testBody)
	sig := Sign(testSecret, body)
	tests := []struct {
		name      string
		secret    string
		body      string
		signature string
		err       error
	}{
		{"as sent", testSecret, testBody, sig, nil},
		{"upper-case hex, surrounding space", testSecret, testBody, " " + strings.ToUpper(sig) + "\n", nil},
		{"body altered", testSecret, testBody + " ", sig, ErrSignature},
		{"another secret", testSecret[:len(testSecret)-1] + "h", testBody, sig, ErrSignature},
		{"truncated signature", testSecret, testBody, sig[:len(sig)-2], ErrSignature},
		{"no signature", testSecret, testBody, "", ErrNoSignature},
	}
	for _, tt := range tests {
		err := Verify(tt.secret, []byte(tt.body), tt.signature)
		if tt.err == nil {
			require.NoError(t, err, tt.name)
		} else {
			require.ErrorIs(t, err, tt.err, tt.name)
		}
	}
}

func TestVerifyStandard(t *testing.T) {
	t.Parallel()

	at := time.Unix(1700000000, 0)
	signed := func() http.Header {
		h := http.Header{}
		SetSignatureHeaders(h, testSecret, "msg_1", at, []byte(testBody))
		return h
	}
	h := signed()
	require.Equal(t, Sign(testSecret, []byte(testBody)), h.Get("X-Checkout-Signature"))
	require.Equal(t, "msg_1", h.Get("webhook-id"))
	require.Equal(t, "1700000000", h.Get("webhook-timestamp"))
	require.Equal(t, "v1,gjt2O9jUvXV1o517aWeda6w0J0vURIHVE/4vIPHrf5Q=", h.Get("webhook-signature"))

	tests := []struct {
		name      string
		change    func(http.Header)
		body      string
		now       time.Time
		tolerance time.Duration
		err       error
	}{
		{name: "as sent", now: at},
		{name: "late within the default tolerance", now: at.Add(5 * time.Minute)},
		{name: "early within the default tolerance", now: at.Add(-5 * time.Minute)},
		{name: "too late", now: at.Add(5*time.Minute + time.Second), err: ErrTimestamp},
		{name: "too early", now: at.Add(-5*time.Minute - time.Second), err: ErrTimestamp},
		{name: "a tolerance of its own", now: at.Add(time.Hour), tolerance: 2 * time.Hour},
		{name: "past a tolerance of its own", now: at.Add(time.Minute), tolerance: time.Second, err: ErrTimestamp},
		{name: "body altered", body: testBody + " ", now: at, err: ErrSignature},
		{name: "another id", change: func(h http.Header) { h.Set("webhook-id", "msg_2") }, now: at, err: ErrSignature},
		{name: "timestamp moved", change: func(h http.Header) {
			h.Set("webhook-timestamp", strconv.FormatInt(at.Unix()+1, 10))
		}, now: at, err: ErrSignature},
		{name: "timestamp not a number", change: func(h http.Header) { h.Set("webhook-timestamp", "soon") }, now: at, err: ErrTimestamp},
		{name: "one of several signatures", change: func(h http.Header) {
			h.Set("webhook-signature", "v1,b3RoZXI= "+h.Get("webhook-signature")+" v2,x")
		}, now: at},
		{name: "signature without its version", change: func(h http.Header) {
			h.Set("webhook-signature", strings.TrimPrefix(h.Get("webhook-signature"), "v1,"))
		}, now: at, err: ErrSignature},
		{name: "no signature", change: func(h http.Header) { h.Del("webhook-signature") }, now: at, err: ErrNoSignature},
		{name: "no id", change: func(h http.Header) { h.Del("webhook-id") }, now: at, err: ErrNoSignature},
		{name: "no timestamp", change: func(h http.Header) { h.Del("webhook-timestamp") }, now: at, err: ErrNoSignature},
	}
	for _, tt := range tests {
		h := signed()
		if tt.change != nil {
			tt.change(h)
		}
		body := testBody
		if tt.body != "" {
			body = tt.body
		}
		err := VerifyStandard(testSecret, h, []byte(body), tt.tolerance, tt.now)
		if tt.err == nil {
			require.NoError(t, err, tt.name)
		} else {
			require.ErrorIs(t, err, tt.err, tt.name)
		}
	}
	require.ErrorIs(t, VerifyStandard(testSecret[:len(testSecret)-1]+"h", signed(), []byte(testBody), 0, at), ErrSignature, "another secret")
}
