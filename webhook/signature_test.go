package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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
	// testSecret is of the earlier form (43 base62 characters), which
	// existing merchants still hold; standardSecret is of the Standard
	// Webhooks form (the base64 of the bytes 0 to 31).
	testSecret     = "whsec_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefg"
	standardSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	testBody       = `{"event":"payment.confirmed"}`
)

func TestSign(t *testing.T) {
	t.Parallel()

	// The earlier form: the Standard Webhooks key is the characters after
	// "whsec_" as they are (what existing receivers verify with).
	require.Equal(t, "82f70ca89397d1a00709342b57653c03764b3135ec959ae196e194a48eac4f34", Sign(testSecret, []byte(testBody)))
	require.Equal(t, "v1,gjt2O9jUvXV1o517aWeda6w0J0vURIHVE/4vIPHrf5Q=", SignStandard(testSecret, "msg_1", 1700000000, []byte(testBody)))
	// The standard form: the key is the decoded bytes; X-Checkout-Signature
	// is still keyed with the whole secret string.
	require.Equal(t, "8954764648dcbf7a6b7e2f38664f617ad01b238b28bd61f7f87cf2b6baf41069", Sign(standardSecret, []byte(testBody)))
	require.Equal(t, "v1,toYZrp9a8VWi+ieXazfSnLrfbTjfJ3mVMv5lWhbesmA=", SignStandard(standardSecret, "msg_1", 1700000000, []byte(testBody)))
}

// TestNewSecret: "whsec_" and the base64 of 32 random bytes, which
// signs with those bytes.
func TestNewSecret(t *testing.T) {
	t.Parallel()

	seen := map[string]bool{}
	for range 200 {
		s, err := NewSecret()
		require.NoError(t, err)
		require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, s)
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		require.NoError(t, err)
		require.Len(t, key, 32)
		require.Equal(t, key, standardKey(s))
		require.False(t, seen[s], "duplicate secret")
		seen[s] = true
	}
}

// TestSignatureHeadersDuringRotation: with a previous secret, the
// webhook-signature header lists the current secret's signature, then the
// previous one's; either secret verifies, a third does not, and
// X-Checkout-Signature stays the current secret's one digest.
func TestSignatureHeadersDuringRotation(t *testing.T) {
	t.Parallel()

	at := time.Unix(1700000000, 0)
	h := http.Header{}
	SetSignatureHeaders(h, standardSecret, "msg_1", at, []byte(testBody), testSecret)
	require.Equal(t, "v1,toYZrp9a8VWi+ieXazfSnLrfbTjfJ3mVMv5lWhbesmA= v1,gjt2O9jUvXV1o517aWeda6w0J0vURIHVE/4vIPHrf5Q=", h.Get("webhook-signature"))
	require.Equal(t, Sign(standardSecret, []byte(testBody)), h.Get("X-Checkout-Signature"))
	for _, secret := range []string{standardSecret, testSecret} {
		require.NoError(t, VerifyStandard(secret, h, []byte(testBody), 0, at), secret)
	}
	other, err := NewSecret()
	require.NoError(t, err)
	require.ErrorIs(t, VerifyStandard(other, h, []byte(testBody), 0, at), ErrSignature)
	require.ErrorIs(t, Verify(testSecret, []byte(testBody), h.Get("X-Checkout-Signature")), ErrSignature)
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

	// A secret of the standard form verifies with its decoded bytes: the
	// same signature under the raw characters (the earlier form's key)
	// does not match.
	h = http.Header{}
	SetSignatureHeaders(h, standardSecret, "msg_1", at, []byte(testBody))
	require.NoError(t, VerifyStandard(standardSecret, h, []byte(testBody), 0, at))
	raw := hmac.New(sha256.New, []byte(strings.TrimPrefix(standardSecret, "whsec_")))
	raw.Write([]byte("msg_1.1700000000." + testBody))
	h.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(raw.Sum(nil)))
	require.ErrorIs(t, VerifyStandard(standardSecret, h, []byte(testBody), 0, at), ErrSignature)
}
