package vault

import (
	"crypto/rand"
	"strings"
)

// Alphabets of the random ids.
const (
	base62     = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	lowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	lowerHex   = "0123456789abcdef"
	base64URL  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
)

// IDFormat is the shape of a random id: Prefix followed by Length
// characters drawn from Alphabet (2 to 256 distinct bytes).
type IDFormat struct {
	Prefix   string
	Alphabet string
	Length   int
}

// The formats of the random ids and codes the service makes. Their shapes
// are part of the API (and of stored rows): TestIDFormats pins each one.
var (
	// SessionIDLive and SessionIDTest are checkout session ids, by mode:
	// 24 base62 characters (about 143 random bits), URL-safe.
	SessionIDLive = IDFormat{Prefix: "cs_live_", Alphabet: base62, Length: 24}
	SessionIDTest = IDFormat{Prefix: "cs_test_", Alphabet: base62, Length: 24}
	// PaymentID is a payment's public id.
	PaymentID = IDFormat{Prefix: "pay_", Alphabet: base62, Length: 24}
	// RefundID is a refund's public id.
	RefundID = IDFormat{Prefix: "re_", Alphabet: base62, Length: 24}
	// SettlementID is a settlement batch's public id.
	SettlementID = IDFormat{Prefix: "st_", Alphabet: base62, Length: 24}
	// InviteCode is an agent's invite code: 10 characters of [a-z0-9]
	// (36^10, about 3.7e15 codes), short enough to type, long enough not to
	// be guessed.
	InviteCode = IDFormat{Alphabet: lowerAlnum, Length: 10}
	// InvitationToken is the token of an e-mailed invitation's link: a
	// bearer credential (opening it proves the address), so 256 random
	// bits, stored hashed (HashSecret).
	InvitationToken = IDFormat{Prefix: "inv_", Alphabet: base62, Length: 43}
	// SignInToken is an e-mailed sign-in link's token, BrowserSessionToken
	// a signed-in browser's cookie: bearer credentials, 256 random bits,
	// stored hashed.
	SignInToken         = IDFormat{Prefix: "sil_", Alphabet: base62, Length: 43}
	BrowserSessionToken = IDFormat{Prefix: "bs_", Alphabet: base62, Length: 43}
	// StepUpToken is the token of an e-mailed confirmation link (a step-up
	// for an account without a passkey): it confirms one action, so it is
	// a bearer credential like a sign-in link, stored hashed.
	StepUpToken = IDFormat{Prefix: "stu_", Alphabet: base62, Length: 43}
	// DashboardSessionToken is a merchant dashboard session's token
	// (X-Dashboard-Session), opened from a browser session.
	DashboardSessionToken = IDFormat{Prefix: "ds_", Alphabet: base62, Length: 43}
	// MerchantEmailToken is the token of the link that confirms a
	// merchant's contact e-mail (it makes the address's account the
	// merchant's owner), UnsubscribeToken the one of an agent mail's
	// unsubscribe link: 256 random bits, stored hashed.
	MerchantEmailToken = IDFormat{Prefix: "mec_", Alphabet: base62, Length: 43}
	UnsubscribeToken   = IDFormat{Prefix: "uns_", Alphabet: base62, Length: 43}
	// ChallengeNonce is the nonce of a signature challenge: 256 random bits
	// as 0x-prefixed hex, as the signed message shows it.
	ChallengeNonce = IDFormat{Prefix: "0x", Alphabet: lowerHex, Length: 64}
	// CSPNonce is a page's Content-Security-Policy nonce (132 random bits).
	CSPNonce = IDFormat{Alphabet: base64URL, Length: 22}
	// InstanceTag makes a worker's River client id unique to one start of
	// the process (48 random bits; the id also carries host and pid).
	InstanceTag = IDFormat{Alphabet: lowerHex, Length: 12}
)

// New draws an id of this format from crypto/rand, every character uniform
// and independent of the others.
func (f IDFormat) New() string {
	out := make([]byte, len(f.Prefix), len(f.Prefix)+f.Length)
	copy(out, f.Prefix)
	return string(appendUniform(out, f.Alphabet, f.Length, readRandom))
}

// Valid reports whether s has this format. It says nothing of whether the
// id exists.
func (f IDFormat) Valid(s string) bool {
	if len(s) != len(f.Prefix)+f.Length || !strings.HasPrefix(s, f.Prefix) {
		return false
	}
	for i := len(f.Prefix); i < len(s); i++ {
		if strings.IndexByte(f.Alphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// readRandom fills b from crypto/rand, which does not fail: since Go 1.24
// it crashes the process rather than return an error.
func readRandom(b []byte) { _, _ = rand.Read(b) }

// acceptBelow is how many of the 256 byte values are kept when drawing from
// an alphabet of n characters: the largest multiple of n not above 256.
// A random byte at or above it is discarded and another one drawn, so each
// character stands for the same number of byte values: taking every byte
// modulo n would favour the first 256%n characters (for base62, 8 of them
// by 5/4).
func acceptBelow(n int) int { return 256 - 256%n }

// appendUniform appends n characters of alphabet to dst, each uniform,
// reading random bytes with read (rejection sampling, see acceptBelow).
func appendUniform(dst []byte, alphabet string, n int, read func([]byte)) []byte {
	if len(alphabet) < 2 || len(alphabet) > 256 {
		panic("vault: an id alphabet has 2 to 256 characters")
	}
	limit := acceptBelow(len(alphabet))
	// A few bytes more than n, since some may be discarded: one read is
	// almost always enough.
	buf := make([]byte, n+n/8+4)
	for n > 0 {
		read(buf)
		for _, b := range buf {
			if int(b) >= limit {
				continue
			}
			dst = append(dst, alphabet[int(b)%len(alphabet)])
			n--
			if n == 0 {
				break
			}
		}
	}
	return dst
}
