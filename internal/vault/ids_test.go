package vault

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIDFormats pins the shape of every id: the patterns are written out
// here, apart from the formats, so changing one fails.
func TestIDFormats(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		format  IDFormat
		pattern string
	}{
		{"live session", SessionIDLive, `^cs_live_[0-9A-Za-z]{24}$`},
		{"test session", SessionIDTest, `^cs_test_[0-9A-Za-z]{24}$`},
		{"payment", PaymentID, `^pay_[0-9A-Za-z]{24}$`},
		{"invite code", InviteCode, `^[a-z0-9]{10}$`},
		{"invitation token", InvitationToken, `^inv_[0-9A-Za-z]{43}$`},
		{"sign-in token", SignInToken, `^sil_[0-9A-Za-z]{43}$`},
		{"step-up token", StepUpToken, `^stu_[0-9A-Za-z]{43}$`},
		{"browser session token", BrowserSessionToken, `^bs_[0-9A-Za-z]{43}$`},
		{"merchant e-mail confirmation token", MerchantEmailToken, `^mec_[0-9A-Za-z]{43}$`},
		{"unsubscribe token", UnsubscribeToken, `^uns_[0-9A-Za-z]{43}$`},
		{"challenge nonce", ChallengeNonce, `^0x[0-9a-f]{64}$`},
		{"CSP nonce", CSPNonce, `^[A-Za-z0-9_-]{22}$`},
		{"instance tag", InstanceTag, `^[0-9a-f]{12}$`},
		{"agent key", secretFormat(PrefixAgentKey), `^ak_[0-9A-Za-z]{43}$`},
		{"live secret key", secretFormat(PrefixSecretLive), `^sk_live_[0-9A-Za-z]{43}$`},
		{"live public key", secretFormat(PrefixPublicLive), `^pk_live_[0-9A-Za-z]{43}$`},
		{"test secret key", secretFormat(PrefixSecretTest), `^sk_test_[0-9A-Za-z]{43}$`},
		{"test public key", secretFormat(PrefixPublicTest), `^pk_test_[0-9A-Za-z]{43}$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			re := regexp.MustCompile(tt.pattern)
			seen := map[string]bool{}
			used := map[rune]bool{}
			for range 300 {
				id := tt.format.New()
				require.Regexp(t, re, id)
				require.True(t, tt.format.Valid(id), id)
				require.False(t, seen[id], "duplicate id %s", id)
				seen[id] = true
				for _, c := range id[len(tt.format.Prefix):] {
					used[c] = true
				}
			}
			// Every character of the alphabet turns up: the pattern and
			// the alphabet agree (missing one by chance is below 1e-20).
			require.Len(t, used, len(tt.format.Alphabet))

			id := tt.format.New()
			body := id[len(tt.format.Prefix):]
			for name, bad := range map[string]string{
				"empty":          "",
				"no prefix":      body,
				"short":          id[:len(id)-1],
				"long":           id + body[:1],
				"foreign char":   id[:len(id)-1] + "!",
				"upper prefix":   strings.ToUpper(tt.format.Prefix) + body,
				"space-trailing": id[:len(id)-1] + " ",
			} {
				if bad == id {
					continue // e.g. no prefix to leave out or upper-case
				}
				require.False(t, tt.format.Valid(bad), "%s: %q", name, bad)
				require.NotRegexp(t, re, bad, "%s: %q", name, bad)
			}
		})
	}
}

func TestAcceptBelow(t *testing.T) {
	t.Parallel()

	for n, want := range map[int]int{62: 248, 36: 252, 16: 256, 64: 256, 2: 256, 3: 255, 255: 255, 256: 256} {
		require.Equal(t, want, acceptBelow(n), "alphabet of %d", n)
	}
}

// TestDrawRejectsAtTheBoundary: for base62 the byte 247 is the last one
// kept; 248 to 255 are discarded and another byte drawn.
func TestDrawRejectsAtTheBoundary(t *testing.T) {
	t.Parallel()

	// 255, 248, 250 and 249 are discarded; 247 is 'z' (61), 0 is '0' and
	// 62 wraps round to '0'.
	out := appendUniform(nil, base62, 3, replay(255, 248, 250, 247, 249, 0, 62))
	require.Equal(t, "z00", string(out))
}

// TestDrawIsUniform: fed every byte value once, in a scrambled order, the
// generator turns the kept ones into each character of the alphabet the
// same number of times. So with uniform random bytes every character is
// equally likely; a plain modulo would count the first 256%n characters
// once more.
func TestDrawIsUniform(t *testing.T) {
	t.Parallel()

	for _, alphabet := range []string{base62, lowerAlnum, lowerHex, base64URL, "abc", "0123456789"} {
		n := len(alphabet)
		var all []byte
		for i := range 256 {
			all = append(all, byte(i*167+89)) // 167 is odd: a permutation of the bytes
		}
		out := appendUniform(nil, alphabet, acceptBelow(n), replay(all...))
		counts := map[byte]int{}
		for _, c := range out {
			counts[c]++
		}
		require.Len(t, counts, n, alphabet)
		for c, k := range counts {
			require.Equal(t, acceptBelow(n)/n, k, "%q in %q", c, alphabet)
		}
	}
}

// replay is a byte source that repeats bs.
func replay(bs ...byte) func([]byte) {
	i := 0
	return func(b []byte) {
		for j := range b {
			b[j] = bs[i%len(bs)]
			i++
		}
	}
}
