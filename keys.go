package agentpay

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"math/big"
	"strings"
)

// Prefixes of the credentials the service issues. The prefix tells a reader
// (and a secret scanner) what a leaked string is and, for merchant keys,
// which mode it belongs to.
const (
	PrefixAgentKey      = "ak_"      // agent API key, header X-Agent-Key
	PrefixSecretLive    = "sk_live_" // merchant secret key, live mode
	PrefixPublicLive    = "pk_live_" // merchant public key, live mode
	PrefixSecretTest    = "sk_test_" // merchant secret key, test mode
	PrefixPublicTest    = "pk_test_" // merchant public key, test mode
	PrefixWebhookSecret = "whsec_"   // merchant webhook signing secret
)

// secretPrefixes lists the known prefixes, longest first where one could be
// a prefix of another, for SecretPrefix.
var secretPrefixes = []string{
	PrefixSecretLive, PrefixPublicLive, PrefixSecretTest, PrefixPublicTest,
	PrefixWebhookSecret, PrefixAgentKey,
}

const (
	secretRandomBytes = 32
	base62Alphabet    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	// secretBody is the base62 length of 32 bytes (62^43 > 2^256), padded so
	// every secret of a kind has the same length.
	secretBody = 43
)

// NewSecret issues a credential: prefix followed by 32 random bytes in base62
// (43 characters, so it survives double-click selection and URLs). plain is
// shown to its owner once; only hash (SHA-256 of plain) is stored.
func NewSecret(prefix string) (plain string, hash []byte, err error) {
	if !knownPrefix(prefix) {
		return "", nil, fmt.Errorf("unknown secret prefix %q", prefix)
	}
	b := make([]byte, secretRandomBytes)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("generating secret: %w", err)
	}
	plain = prefix + base62(b)
	return plain, HashSecret(plain), nil
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

// SecretPrefix returns the known prefix plain starts with, or "" if none;
// authentication uses it to tell live from test keys before any lookup.
func SecretPrefix(plain string) string {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(plain, p) {
			return p
		}
	}
	return ""
}

func knownPrefix(prefix string) bool {
	for _, p := range secretPrefixes {
		if p == prefix {
			return true
		}
	}
	return false
}

// base62 encodes b as a fixed-width big-endian base62 number.
func base62(b []byte) string {
	n := new(big.Int).SetBytes(b)
	out := make([]byte, secretBody)
	base := big.NewInt(62)
	rem := new(big.Int)
	for i := secretBody - 1; i >= 0; i-- {
		n.DivMod(n, base, rem)
		out[i] = base62Alphabet[rem.Int64()]
	}
	return string(out)
}
