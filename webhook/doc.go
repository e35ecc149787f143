// Package webhook is the wire format of agentpay's webhooks: how a delivery
// is signed, how a receiver verifies it, and the HTTP client that sends
// deliveries without reaching private addresses. It imports nothing else of
// agentpay, so a merchant's Go code can import it to verify requests.
//
// Every delivery is a POST of the event's JSON, signed twice over the exact
// bytes of the body:
//
//   - Standard Webhooks (https://www.standardwebhooks.com): webhook-id (the
//     event id, the same on every attempt and redelivery), webhook-timestamp
//     (Unix seconds of the attempt) and webhook-signature
//     "v1,<base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>"))>"; see
//     SignStandard and VerifyStandard. This is the one to verify: the
//     timestamp is signed, and VerifyStandard (like every Standard Webhooks
//     library) refuses one further than its tolerance from now (5 minutes
//     by default), so a captured request cannot be replayed later.
//   - X-Checkout-Signature (spec 6.1): hex(HMAC-SHA256(key = the whole
//     webhook secret as shown to the merchant, "whsec_" included, body));
//     see Sign and Verify. It signs the body only, with no timestamp, so it
//     does not protect against a replay: a receiver relying on it alone must
//     dedupe on the event id and can still be sent an old event again.
//
// Secrets: "whsec_" followed by the base64 of 32 random bytes (NewSecret),
// the Standard Webhooks form: the key is the decoded bytes, so the secret
// is given to a Standard Webhooks library exactly as issued. Secrets issued
// before that form are "whsec_" followed by 43 base62 characters, which is
// never valid base64; their key is those characters as they are, and
// SignStandard and VerifyStandard take either form (standardKey). A
// Standard Webhooks library needs such an older secret re-encoded,
// "whsec_" + base64(the 43 characters); rolling the secret issues one in the
// standard form.
//
// Rotation: while a rolled secret's overlap lasts, webhook-signature lists a
// signature under the new secret and one under the previous, separated by a
// space (SetSignatureHeaders); a receiver holding either secret verifies,
// because a Standard Webhooks verifier accepts a request when any listed
// signature matches. X-Checkout-Signature is one digest, under the new
// secret only.
//
// The sender's side: NewClient builds the HTTP client deliveries go
// through. With PublicOnly it refuses, when connecting, any address that is
// not public (IsPublicAddr): the check runs on the IP actually dialled, after
// name resolution, so neither a name that resolves to a private address nor
// DNS rebinding gets around it. CheckPublicHost is the early check of a
// URL's host, before any name is resolved. A receiver's answer may not make
// a try buffer much: its headers are bounded (MaxResponseHeaderBytes).
package webhook
