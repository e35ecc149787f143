package vault

import (
	"crypto/sha256"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var allPrefixes = []string{
	PrefixAgentKey, PrefixSecretLive, PrefixPublicLive,
	PrefixSecretTest, PrefixPublicTest,
}

func TestNewSecretPrefixes(t *testing.T) {
	t.Parallel()

	require.Equal(t, []string{"ak_", "sk_live_", "pk_live_", "sk_test_", "pk_test_"}, allPrefixes)
	require.Equal(t, "whsec_", PrefixWebhookSecret)
	require.Equal(t, PrefixWebhookSecret, SecretPrefix("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	for _, p := range allPrefixes {
		plain, hash, err := NewSecret(p)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(plain, p), plain)
		require.Regexp(t, `^`+p+`[0-9A-Za-z]{43}$`, plain)
		require.True(t, WellFormedSecret(plain, p))
		require.Equal(t, p, SecretPrefix(plain))
		require.Len(t, hash, sha256.Size)
	}
}

func TestNewSecretRejectsUnknownPrefix(t *testing.T) {
	t.Parallel()

	// Webhook secrets are of the Standard Webhooks form, issued elsewhere
	// (webhook.NewSecret), never base62 credentials.
	for _, p := range []string{"", "ak", "sk_", "rk_live_", PrefixWebhookSecret} {
		_, _, err := NewSecret(p)
		require.Error(t, err, p)
	}
	require.Empty(t, SecretPrefix("sk_other_abc"))
}

func TestNewSecretUnique(t *testing.T) {
	t.Parallel()

	seen := make(map[string]bool)
	for range 1000 {
		plain, _, err := NewSecret(PrefixAgentKey)
		require.NoError(t, err)
		require.False(t, seen[plain], "duplicate secret")
		seen[plain] = true
	}
}

func TestSecretHashVerification(t *testing.T) {
	t.Parallel()

	plain, hash, err := NewSecret(PrefixSecretLive)
	require.NoError(t, err)

	sum := sha256.Sum256([]byte(plain))
	require.Equal(t, sum[:], hash)
	require.Equal(t, hash, HashSecret(plain))
	require.NotContains(t, string(hash), plain)

	require.True(t, SecretMatches(hash, plain))
	require.False(t, SecretMatches(hash, plain+"x"))
	require.False(t, SecretMatches(hash, plain[:len(plain)-1]))
	// The same random body under another prefix is another credential.
	require.False(t, SecretMatches(hash, PrefixSecretTest+strings.TrimPrefix(plain, PrefixSecretLive)))
	require.False(t, SecretMatches(hash, ""))
	require.False(t, SecretMatches(nil, plain))
	require.False(t, SecretMatches(hash[:16], plain))

	other, otherHash, err := NewSecret(PrefixSecretLive)
	require.NoError(t, err)
	require.False(t, SecretMatches(otherHash, plain))
	require.False(t, SecretMatches(hash, other))
}

func TestWellFormedSecret(t *testing.T) {
	t.Parallel()

	plain, _, err := NewSecret(PrefixSecretLive)
	require.NoError(t, err)
	body := strings.TrimPrefix(plain, PrefixSecretLive)
	require.True(t, WellFormedSecret(plain, PrefixSecretLive))
	for name, bad := range map[string]string{
		"other prefix": PrefixSecretTest + body,
		"no prefix":    body,
		"short":        plain[:len(plain)-1],
		"long":         plain + "a",
		"not base62":   plain[:len(plain)-1] + "-",
		"empty":        "",
	} {
		require.False(t, WellFormedSecret(bad, PrefixSecretLive), name)
	}
}

// TestSecretMatchesIsConstantTime checks the source: timing cannot be
// measured reliably in a unit test, but we can make sure the comparison goes
// through crypto/subtle and never through a short-circuiting comparison.
func TestSecretMatchesIsConstantTime(t *testing.T) {
	t.Parallel()

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "secrets.go", nil, 0)
	require.NoError(t, err)

	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "SecretMatches" {
			fn = d
		}
	}
	require.NotNil(t, fn, "SecretMatches not found in secrets.go")

	var usesSubtle, usesShortCircuit bool
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				if id.Name == "subtle" && n.Sel.Name == "ConstantTimeCompare" {
					usesSubtle = true
				}
				if id.Name == "bytes" && (n.Sel.Name == "Equal" || n.Sel.Name == "Compare") {
					usesShortCircuit = true
				}
				if id.Name == "hmac" && n.Sel.Name == "Equal" {
					usesSubtle = true // hmac.Equal is constant time too
				}
			}
		case *ast.BinaryExpr:
			// A string comparison of hashes would short-circuit.
			if n.Op == token.EQL {
				if call, ok := n.X.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "ConstantTimeCompare" {
						return true
					}
				}
				usesShortCircuit = true
			}
		}
		return true
	})
	require.True(t, usesSubtle, "SecretMatches must compare with crypto/subtle")
	require.False(t, usesShortCircuit, "SecretMatches must not use a short-circuiting comparison")
}
