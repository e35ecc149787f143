package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// SecretBytes is how many random bytes a webhook secret holds (256 bits).
const SecretBytes = 32

// Request headers of a delivery.
const (
	// HeaderCheckoutSignature carries Sign of the body.
	HeaderCheckoutSignature = "X-Checkout-Signature"
	// HeaderID, HeaderTimestamp and HeaderSignature are the Standard
	// Webhooks headers: the event id (the same on every attempt and
	// redelivery), the attempt's Unix time in seconds and SignStandard.
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a Standard Webhooks timestamp may be from the
// receiver's clock, either way (the value Standard Webhooks libraries use).
const DefaultTolerance = 5 * time.Minute

var (
	// ErrNoSignature: a signature header (or, for VerifyStandard, the id or
	// timestamp) is missing.
	ErrNoSignature = errors.New("webhook: signature headers missing")
	// ErrSignature: the signature is not the body's under this secret (another
	// secret, or the body was altered).
	ErrSignature = errors.New("webhook: signature does not match")
	// ErrTimestamp: the Standard Webhooks timestamp is not a number or is
	// further from now than the tolerance (an old request replayed).
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
)

// Sign is the X-Checkout-Signature of body: the hex HMAC-SHA256 of the body
// keyed with the whole webhook secret, "whsec_" included.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// NewSecret issues a webhook secret in the Standard Webhooks form:
// "whsec_" followed by the base64 of SecretBytes random bytes, which is what
// a Standard Webhooks library takes as it is.
func NewSecret() (string, error) {
	key := make([]byte, SecretBytes)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// standardKey is the HMAC key of a secret's Standard Webhooks signature: the
// bytes the base64 after "whsec_" decodes to. A secret of the earlier form
// ("whsec_" and 43 base62 characters, issued before the standard form) is
// never valid base64 (43 characters are not a whole number of base64
// quadruples), so it cannot be mistaken for one; its key is those 43
// characters as they are, which is what it has always been signed with.
func standardKey(secret string) []byte {
	s := strings.TrimPrefix(secret, SecretPrefix)
	if key, err := base64.StdEncoding.Strict().DecodeString(s); err == nil && len(key) > 0 {
		return key
	}
	return []byte(s)
}

// SignStandard is one v1 signature of the webhook-signature header: "v1,"
// and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>", keyed with the
// bytes the secret's base64 decodes to (see standardKey).
func SignStandard(secret, id string, timestamp int64, body []byte) string {
	return standardSignature(secret, id, strconv.FormatInt(timestamp, 10), body)
}

func standardSignature(secret, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, standardKey(secret))
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SetSignatureHeaders sets the headers that sign one attempt to deliver
// body: X-Checkout-Signature and the Standard Webhooks id, timestamp (at)
// and signature. previous are secrets being rotated out: while they last,
// webhook-signature carries a signature under each of them too, after the
// current secret's and separated by spaces (the Standard Webhooks form), so
// a receiver still holding an older secret keeps verifying.
// X-Checkout-Signature holds one digest only, under the current secret.
func SetSignatureHeaders(h http.Header, secret, id string, at time.Time, body []byte, previous ...string) {
	ts := at.Unix()
	sigs := make([]string, 0, 1+len(previous))
	for _, s := range append([]string{secret}, previous...) {
		sigs = append(sigs, SignStandard(s, id, ts, body))
	}
	h.Set(HeaderCheckoutSignature, Sign(secret, body))
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}

// Verify checks an X-Checkout-Signature value against the body received,
// comparing in constant time. body must be the exact bytes received, before
// any JSON decoding.
func Verify(secret string, body []byte, signature string) error {
	signature = strings.ToLower(strings.TrimSpace(signature))
	if signature == "" {
		return ErrNoSignature
	}
	if !hmac.Equal([]byte(Sign(secret, body)), []byte(signature)) {
		return ErrSignature
	}
	return nil
}

// VerifyStandard checks the Standard Webhooks headers of a request against
// the body received: webhook-signature must hold the v1 signature of
// webhook-id, webhook-timestamp and body under secret (it may list several,
// separated by spaces, as it does while a secret is being rotated; one
// matching is enough), compared in constant time, and webhook-timestamp must
// be within tolerance of now either way, so a captured request cannot be
// replayed later. A tolerance of 0 or less is DefaultTolerance. secret is
// the webhook secret as issued, in either form (see the package
// documentation). A retry carries the same webhook-id: receivers dedupe on
// it.
func VerifyStandard(secret string, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	id, timestamp, signatures := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || timestamp == "" || signatures == "" {
		return ErrNoSignature
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if at := time.Unix(sec, 0); now.Sub(at) > tolerance || at.Sub(now) > tolerance {
		return ErrTimestamp
	}
	want := []byte(standardSignature(secret, id, timestamp, body))
	for _, sig := range strings.Fields(signatures) {
		if hmac.Equal(want, []byte(sig)) {
			return nil
		}
	}
	return ErrSignature
}
