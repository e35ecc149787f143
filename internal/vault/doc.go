// Package vault holds the service's secrets machinery: the master key and
// what is derived from it.
//
// Everything comes from a single 32-byte master key (MASTER_KEY), so one
// secret is enough to run the service:
//
//   - sealing key = HKDF-SHA256(master, info "agentpay vault aes-256-gcm v1"), used
//     with AES-256-GCM to seal what the service keeps at rest (custodial wallet
//     keys, webhook secrets); a ciphertext is version(1) || nonce(12) || sealed data+tag;
//   - deposit seed = HKDF-SHA256(master, info "agentpay deposit seed v1"), 64 bytes,
//     the BIP-32 / SLIP-0010 seed of checkout deposit addresses;
//   - treasury seed = HKDF-SHA256(master, info "agentpay treasury seed v1"), 64 bytes,
//     from which the treasury keys are derived; a seed of its own keeps the
//     treasury apart from every deposit index;
//   - challenge key = HKDF-SHA256(master, info "agentpay payment challenge key v1"),
//     32 bytes, the HMAC key binding the ids of the MPP Payment challenges the
//     service issues (../../mpp.go), so every instance verifies what any issued.
//
// Losing the master key loses every custodial key and deposit address;
// leaking it leaks them all.
//
// Credentials (agent and merchant keys) are a prefix that tells their kind
// and 256 random bits; only their SHA-256 is stored, and a presented key is
// compared with it in constant time. Webhook secrets share the "whsec_"
// prefix (SecretPrefix tells them apart) but are issued in the Standard
// Webhooks form by package webhook, and sealed rather than hashed, because
// every delivery signs with them.
//
// Random ids and codes (credentials, session and payment ids, invite codes,
// nonces) are drawn by one generator, IDFormat.New: each character uniform
// from crypto/rand, by rejection sampling when the alphabet's size does not
// divide 256, so no character is likelier than another.
package vault
