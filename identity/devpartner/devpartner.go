// Package devpartner is the identity partner `agentpay dev` runs, so an
// agent's verify-partner works offline: it holds an ES256 key made at
// start, publishes the public half as a JWKS (GET /dev/partner/jwks.json)
// and signs the attestations the service mints on request
// (POST /dev/partner/attest; the rule is the root's DevPartnerAttest). It
// is one of the service's partners through Config.DevPartner. Never in
// `serve`: anyone may ask it for an attestation.
package devpartner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"agentpay"
)

// Name is the dev partner's name and issuer.
const Name = "agentpay-dev"

// Partner is the dev identity partner; it implements agentpay.DevPartner.
type Partner struct {
	key    jwk.Key // private, with its kid
	public jwk.Set
}

// New makes the dev partner with a fresh P-256 key; attestations signed
// before a restart no longer verify after it (they live minutes).
func New() (*Partner, error) {
	raw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	key, err := jwk.Import(raw)
	if err != nil {
		return nil, err
	}
	if err := jwk.AssignKeyID(key); err != nil {
		return nil, err
	}
	for name, v := range map[string]any{jwk.AlgorithmKey: jwa.ES256(), jwk.KeyUsageKey: "sig"} {
		if err := key.Set(name, v); err != nil {
			return nil, err
		}
	}
	pub, err := jwk.PublicKeyOf(key)
	if err != nil {
		return nil, err
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return nil, err
	}
	return &Partner{key: key, public: set}, nil
}

// Partner is the dev partner as a configured partner: its public key
// given, not fetched.
func (p *Partner) Partner() agentpay.Partner {
	return agentpay.Partner{Name: Name, Algorithm: agentpay.PartnerES256, Keys: p.public}
}

// JWKS is the partner's public key set as JSON.
func (p *Partner) JWKS() ([]byte, error) {
	return json.Marshal(p.public)
}

// Sign signs an attestation's claims with the partner's key.
func (p *Partner) Sign(tok jwt.Token) (string, error) {
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), p.key))
	return string(signed), err
}
