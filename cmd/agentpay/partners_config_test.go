package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/stretchr/testify/require"

	"agentpay"
)

// PARTNERS: partners separated by ';', each its name and settings; a key
// file is read at start; every mistake names the variable and the partner.
func TestLoadConfigPartners(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	k, err := jwk.Import(priv) // a private key in the file: only its public half is kept
	require.NoError(t, err)
	raw, err := json.Marshal(k)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "acme.jwk")
	require.NoError(t, os.WriteFile(keyFile, raw, 0o600))

	c, err := loadConfig(envOf(map[string]string{"PARTNERS": "skyfire alg=ES256 jwks=https://app.skyfire.xyz/.well-known/jwks.json " +
		"iss=https://app.skyfire.xyz ;  acme  alg=EdDSA keyfile=" + keyFile + " aud=https://api.example.com;"}))
	require.NoError(t, err)
	require.Len(t, c.Partners, 2)
	require.Equal(t, agentpay.Partner{Name: "skyfire", Algorithm: "ES256", Issuer: "https://app.skyfire.xyz",
		JWKSURL: "https://app.skyfire.xyz/.well-known/jwks.json"}, c.Partners[0])
	acme := c.Partners[1]
	require.Equal(t, "acme", acme.Name)
	require.Equal(t, "EdDSA", acme.Algorithm)
	require.Equal(t, "https://api.example.com", acme.Audience)
	require.Equal(t, 1, acme.Keys.Len())
	got, _ := acme.Keys.Key(0)
	var want jwk.Key
	want, err = jwk.Import(pub)
	require.NoError(t, err)
	require.True(t, jwk.Equal(want, got))

	c, err = loadConfig(envOf(nil))
	require.NoError(t, err)
	require.Empty(t, c.Partners)

	for value, msg := range map[string]string{
		"acme":                                    `PARTNERS: partner "acme": alg must be ES256 or EdDSA, got ""`,
		"acme alg=HS256 jwks=https://a.test/k":    `PARTNERS: partner "acme": alg must be ES256 or EdDSA, got "HS256"`,
		"acme alg=ES256":                          `PARTNERS: partner "acme": give exactly one of jwks= and keyfile=`,
		"acme alg=ES256 jwks=ftp://a.test/k":      `PARTNERS: partner "acme": jwks must be an absolute http(s) URL`,
		"acme alg=ES256 keyfile=/nonexistent.jwk": `PARTNERS: partner "acme": keyfile /nonexistent.jwk`,
		"acme alg=ES256 colour=red":               `PARTNERS: partner "acme": unknown setting "colour"`,
		"acme alg=ES256 jwks":                     `PARTNERS: partner "acme": "jwks" is not a setting (key=value)`,
		"a/b alg=ES256 jwks=https://a.test/k":     `PARTNERS: a partner's name holds letters, digits`,
		"a alg=ES256 jwks=https://a.test/k; a alg=ES256 jwks=https://a.test/k": `PARTNERS: partner "a": named twice`,
	} {
		_, err := loadConfig(envOf(map[string]string{"PARTNERS": value}))
		require.ErrorContains(t, err, msg, value)
	}
}
