package agentpay

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"agentpay/ent"
)

// DevPartner is the identity partner `agentpay dev` runs
// (identity/devpartner): one of the service's partners (Config.DevPartner)
// that signs the attestations DevPartnerAttest mints for any agent, so
// verify-partner works offline. Never in `serve`: anyone may ask it.
type DevPartner interface {
	// Partner is it as a configured partner, its public key given.
	Partner() Partner
	// JWKS is its public key set as JSON.
	JWKS() ([]byte, error)
	// Sign signs an attestation's claims.
	Sign(jwt.Token) (string, error)
}

// devAttestationLifetime is how long a dev attestation lives: well inside
// PartnerAttestationMaxLifetime.
const devAttestationLifetime = 5 * time.Minute

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
	name := d.Partner().Name
	p := s.partners[name]
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
	signed, err := d.Sign(tok)
	if err != nil {
		return nil, fmt.Errorf("signing dev attestation: %w", err)
	}
	return &DevAttestation{Partner: name, AgentID: id, Attestation: signed, ExpiresAt: exp}, nil
}
