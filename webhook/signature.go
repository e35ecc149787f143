package webhook

import (
	"crypto/hmac"
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

// SignStandard is the webhook-signature header of one attempt: "v1," and
// the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>", keyed with the
// secret's characters after "whsec_" (see the package documentation).
func SignStandard(secret, id string, timestamp int64, body []byte) string {
	return standardSignature(secret, id, strconv.FormatInt(timestamp, 10), body)
}

func standardSignature(secret, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(strings.TrimPrefix(secret, SecretPrefix)))
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SetSignatureHeaders sets the headers that sign one attempt to deliver
// body: X-Checkout-Signature and the Standard Webhooks id, timestamp (at)
// and signature.
func SetSignatureHeaders(h http.Header, secret, id string, at time.Time, body []byte) {
	ts := at.Unix()
	h.Set(HeaderCheckoutSignature, Sign(secret, body))
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, SignStandard(secret, id, ts, body))
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
// webhook-id, webhook-timestamp and body (it may list several, separated by
// spaces; one matching is enough), compared in constant time, and
// webhook-timestamp must be within tolerance of now either way, so a
// captured request cannot be replayed later. A tolerance of 0 or less is
// DefaultTolerance. A retry carries the same webhook-id: receivers dedupe on
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
