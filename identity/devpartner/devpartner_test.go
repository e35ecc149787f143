package devpartner

import (
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"github.com/stretchr/testify/require"
)

// TestSignedAttestationVerifiesWithTheJWKS: what the partner signs
// verifies with the key set it publishes, and with no other partner's.
func TestSignedAttestationVerifiesWithTheJWKS(t *testing.T) {
	p, err := New()
	require.NoError(t, err)
	tok, err := jwt.NewBuilder().Issuer(Name).Subject("agent").Expiration(time.Now().Add(time.Minute)).Build()
	require.NoError(t, err)
	signed, err := p.Sign(tok)
	require.NoError(t, err)

	raw, err := p.JWKS()
	require.NoError(t, err)
	set, err := jwk.Parse(raw)
	require.NoError(t, err)
	got, err := jwt.Parse([]byte(signed), jwt.WithKeySet(set))
	require.NoError(t, err)
	sub, ok := got.Subject()
	require.True(t, ok)
	require.Equal(t, "agent", sub)

	other, err := New()
	require.NoError(t, err)
	otherRaw, err := other.JWKS()
	require.NoError(t, err)
	otherSet, err := jwk.Parse(otherRaw)
	require.NoError(t, err)
	_, err = jwt.Parse([]byte(signed), jwt.WithKeySet(otherSet))
	require.Error(t, err, "another partner's keys do not verify it")

	require.Equal(t, Name, p.Partner().Name)
	k, ok := set.Key(0)
	require.True(t, ok)
	_, isPrivate := k.(jwk.ECDSAPrivateKey)
	require.False(t, isPrivate, "the published set holds the public key only")
}
