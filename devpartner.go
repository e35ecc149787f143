package agentpay

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"agentpay/ent"
)

// DevPartnerName is the identity partner `agentpay dev` runs.
const DevPartnerName = "agentpay-dev"

// devAttestationLifetime is how long a dev attestation lives: well inside
// PartnerAttestationMaxLifetime.
const devAttestationLifetime = 5 * time.Minute

// DevPartner is the identity partner of `agentpay dev`: it mints
// attestations for any agent (POST /dev/partner/attest) with an ES256 key
// made at start, publishes the key as a JWKS (GET /dev/partner/jwks.json),
// and is one of the service's partners (Config.DevPartner), so
// verify-partner works offline. Never in `serve`: anyone may ask it.
type DevPartner struct {
	key    jwk.Key // private, with its kid
	public jwk.Set
}

// NewDevPartner makes the dev partner with a fresh P-256 key; attestations
// minted before a restart no longer verify after it (they live minutes).
func NewDevPartner() (*DevPartner, error) {
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
	return &DevPartner{key: key, public: set}, nil
}

// Name is the partner's name and issuer.
func (d *DevPartner) Name() string { return DevPartnerName }

// Partner is the dev partner as a configured partner: its public key
// given, not fetched.
func (d *DevPartner) Partner() Partner {
	return Partner{Name: DevPartnerName, Algorithm: PartnerES256, Keys: d.public}
}

// JWKS is the partner's public key set as JSON.
func (d *DevPartner) JWKS() ([]byte, error) {
	return json.Marshal(d.public)
}

// DevAttestation is an attestation the dev partner minted.
type DevAttestation struct {
	Partner     string
	AgentID     uuid.UUID
	Attestation string
	ExpiresAt   time.Time
}

// DevPartnerJWKS is the dev partner's public key set; ErrNotFound outside
// `agentpay dev`.
func (s *Service) DevPartnerJWKS() ([]byte, error) {
	if s.cfg.DevPartner == nil {
		return nil, ErrNotFound
	}
	return s.cfg.DevPartner.JWKS()
}

// DevPartnerAttest mints the dev partner's attestation for an agent, as a
// real partner would for an agent it knows: for this service's audience,
// living devAttestationLifetime. An unknown agent is ErrNotFound;
// ErrNotFound too outside `agentpay dev`.
func (s *Service) DevPartnerAttest(ctx context.Context, agentID string) (*DevAttestation, error) {
	d := s.cfg.DevPartner
	if d == nil {
		return nil, ErrNotFound
	}
	if agentID == "" {
		return nil, Invalid("agent_id", "is required")
	}
	id, err := uuid.Parse(agentID)
	if err != nil {
		return nil, Invalid("agent_id", "must be an agent's id (a UUID)")
	}
	if _, err := s.cfg.DB.Ent.Agent.Get(ctx, id); ent.IsNotFound(err) {
		return nil, errAgentNotFound
	} else if err != nil {
		return nil, fmt.Errorf("reading agent: %w", err)
	}
	p := s.partners[d.Name()]
	now := s.now().UTC().Truncate(time.Second)
	exp := now.Add(devAttestationLifetime)
	tok, err := jwt.NewBuilder().
		Issuer(p.issuer).
		Audience([]string{p.audience}).
		Subject(id.String()).
		IssuedAt(now).
		Expiration(exp).
		JwtID(uuid.NewString()).
		Build()
	if err != nil {
		return nil, err
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.ES256(), d.key))
	if err != nil {
		return nil, fmt.Errorf("signing dev attestation: %w", err)
	}
	return &DevAttestation{Partner: d.Name(), AgentID: id, Attestation: string(signed), ExpiresAt: exp}, nil
}
