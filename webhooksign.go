package agentpay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"

	"agentpay/internal/vault"
)

// Webhook signatures. Every delivery carries two, over the exact bytes of the
// body:
//
//   - X-Checkout-Signature (spec 6.1): hex(HMAC-SHA256(key = the whole webhook
//     secret as shown to the merchant, "whsec_..." included, body)).
//   - Standard Webhooks (https://www.standardwebhooks.com): headers
//     webhook-id (the event id, the same on every attempt and redelivery),
//     webhook-timestamp (Unix seconds of the attempt) and webhook-signature
//     "v1,<base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))>".
//
// The Standard Webhooks key: that standard's secrets are "whsec_" followed by
// base64 and the key is the decoded bytes. Ours are "whsec_" followed by 43
// base62 characters, which is not valid base64, so the key is the raw ASCII
// bytes after the prefix. A receiver using a Standard Webhooks library passes
// it "whsec_" + base64(the characters after our prefix), and the library then
// derives the same key.

// Webhook request headers.
const (
	HeaderCheckoutSignature = "X-Checkout-Signature"
	HeaderWebhookID         = "webhook-id"
	HeaderWebhookTimestamp  = "webhook-timestamp"
	HeaderWebhookSignature  = "webhook-signature"
)

// SignWebhookBody is the X-Checkout-Signature of body: the hex HMAC-SHA256
// keyed with the merchant's webhook secret.
func SignWebhookBody(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// StandardWebhookKey is the HMAC key of the Standard Webhooks signature: the
// secret's characters after the "whsec_" prefix (see the comment above).
func StandardWebhookKey(secret string) []byte {
	return []byte(strings.TrimPrefix(secret, vault.PrefixWebhookSecret))
}

// StandardWebhookSignature is the webhook-signature header value for one
// attempt: "v1," followed by the base64 HMAC-SHA256 of "<id>.<ts>.<body>".
func StandardWebhookSignature(secret, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, StandardWebhookKey(secret))
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// VerifyWebhookSignature reports whether header is the X-Checkout-Signature
// of body under secret, comparing in constant time. It is what a receiver
// does (spec 6.1); the service uses it in tests and examples.
func VerifyWebhookSignature(secret string, body []byte, header string) bool {
	want := SignWebhookBody(secret, body)
	return hmac.Equal([]byte(want), []byte(strings.ToLower(strings.TrimSpace(header))))
}
