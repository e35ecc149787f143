// Package webhook is the wire format of agentpay's webhooks: how a delivery
// is signed, how a receiver verifies it, and the HTTP client that sends
// deliveries without reaching private addresses. It imports nothing else of
// agentpay, so a merchant's Go code can import it to verify requests.
//
// Every delivery is a POST of the event's JSON, signed twice over the exact
// bytes of the body:
//
//   - X-Checkout-Signature: hex(HMAC-SHA256(key = the whole webhook secret
//     as shown to the merchant, "whsec_" included, body)); see Sign and
//     Verify.
//   - Standard Webhooks (https://www.standardwebhooks.com): webhook-id (the
//     event id, the same on every attempt and redelivery), webhook-timestamp
//     (Unix seconds of the attempt) and webhook-signature
//     "v1,<base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))>"; see
//     SignStandard and VerifyStandard, which also refuses a timestamp too far
//     from now, so a captured request cannot be replayed.
//
// The Standard Webhooks key: that standard's secrets are "whsec_" followed by
// base64 and the key is the decoded bytes. Ours are "whsec_" followed by 43
// base62 characters, which is not valid base64, so the key is the raw ASCII
// bytes after the prefix. A receiver using a Standard Webhooks library passes
// it "whsec_" + base64(the characters after our prefix), and the library then
// derives the same key.
//
// The sender's side: NewClient builds the HTTP client deliveries go
// through. With PublicOnly it refuses, when connecting, any address that is
// not public (IsPublicAddr): the check runs on the IP actually dialled, after
// name resolution, so neither a name that resolves to a private address nor
// DNS rebinding gets around it. CheckPublicHost is the early check of a
// URL's host, before any name is resolved.
package webhook
