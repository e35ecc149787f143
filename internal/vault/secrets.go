package vault

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"

	"agentpay/webhook"
)

// Prefixes of the credentials the service issues. The prefix tells a reader
// (and a secret scanner) what a leaked string is and, for merchant keys,
// which mode it belongs to.
const (
	PrefixAgentKey      = "ak_"                // agent API key, header X-Agent-Key
	PrefixSecretLive    = "sk_live_"           // merchant secret key, live mode
	PrefixPublicLive    = "pk_live_"           // merchant public key, live mode
	PrefixSecretTest    = "sk_test_"           // merchant secret key, test mode
	PrefixPublicTest    = "pk_test_"           // merchant public key, test mode
	PrefixWebhookSecret = webhook.SecretPrefix // merchant webhook signing secret
)

// secretPrefixes lists the known prefixes, longest first where one could be
// a prefix of another, for SecretPrefix.
var secretPrefixes = []string{
	PrefixSecretLive, PrefixPublicLive, PrefixSecretTest, PrefixPublicTest,
	PrefixWebhookSecret, PrefixAgentKey,
}

// issuedPrefixes are the credentials NewSecret issues: every known prefix
// but the webhook secret's, which webhook.NewSecret issues in the Standard
// Webhooks form (base64 of random bytes, not base62).
var issuedPrefixes = []string{
	PrefixSecretLive, PrefixPublicLive, PrefixSecretTest, PrefixPublicTest, PrefixAgentKey,
}

// secretLength is how many random base62 characters follow a credential's
// prefix: 43, since 62^43 > 2^256.
const secretLength = 43

// secretFormat is the shape of the credentials of prefix.
func secretFormat(prefix string) IDFormat {
	return IDFormat{Prefix: prefix, Alphabet: base62, Length: secretLength}
}

// NewSecret issues a credential: prefix followed by 43 random base62
// characters (256 random bits; base62 so it survives double-click selection
// and URLs). plain is shown to its owner once; only hash (SHA-256 of plain)
// is stored.
func NewSecret(prefix string) (plain string, hash []byte, err error) {
	if prefix == PrefixWebhookSecret {
		return "", nil, fmt.Errorf("webhook secrets are issued by webhook.NewSecret")
	}
	if !slices.Contains(issuedPrefixes, prefix) {
		return "", nil, fmt.Errorf("unknown secret prefix %q", prefix)
	}
	plain = secretFormat(prefix).New()
	return plain, HashSecret(plain), nil
}

// WellFormedSecret reports whether plain has the shape of a credential of
// prefix, which says nothing of whether it was issued: authentication
// refuses a malformed key without looking it up.
func WellFormedSecret(plain, prefix string) bool {
	return secretFormat(prefix).Valid(plain)
}

// HashSecret is the stored form of a credential: SHA-256 of the whole string,
// prefix included. A fast hash is enough because the input has 256 bits of
// entropy; there is nothing to brute-force.
func HashSecret(plain string) []byte {
	h := sha256.Sum256([]byte(plain))
	return h[:]
}

// SecretMatches reports whether plain hashes to hash, comparing in constant
// time so response timing does not reveal how much of a guess matched.
func SecretMatches(hash []byte, plain string) bool {
	return subtle.ConstantTimeCompare(hash, HashSecret(plain)) == 1
}

// SecretPrefix returns the known prefix plain starts with, or "" if none:
// it tells what kind of credential a string is (and, for merchant keys,
// their mode) before any lookup.
func SecretPrefix(plain string) string {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(plain, p) {
			return p
		}
	}
	return ""
}
