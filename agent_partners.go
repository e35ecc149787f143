package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/internal/jwks"
	"agentpay/internal/store"
)

// Partner identity (design.md section 3, issue 12): an identity partner
// (Skyfire's KYA, a platform that knows its agents...) vouches for an
// agent with a short-lived JWT, the attestation; the agent presents it to
// POST /agents/me/verify-partner, and a verified partner identity is worth
// TrustPartnerPoints of trust score.
//
// An attestation is accepted when it is a compact JWS signed by one of the
// partner's keys with the partner's algorithm (configured, never read from
// the token: a token naming another algorithm, none or HS256 or RS256
// included, is refused before any key is used), and its claims say:
//
//	iss  the partner's issuer (its name unless configured)
//	aud  this service (BASE_URL unless configured)
//	sub  the presenting agent's id
//	exp  required, in the future, at most PartnerAttestationMaxLifetime ahead
//	iat  required, not in the future, at most PartnerAttestationMaxLifetime before exp
//	nbf  if present, passed
//	jti  required; used once per partner (the partner_attestations unique
//	     index decides, across instances and concurrent requests)
//
// each time comparison with PartnerClockSkew of tolerance. Anything else is
// a ValidationError naming what is wrong, and nothing changes.

// Partner algorithms: what a partner may be configured to sign with.
const (
	PartnerES256 = "ES256"
	PartnerEdDSA = "EdDSA"
)

// Attestation bounds.
const (
	// PartnerAttestationMaxLifetime is how far ahead an attestation's exp
	// may be, and how long it may live (exp - iat): an attestation is made
	// for the one request that presents it, and the replay store keeps its
	// jti only for as long as it could be presented.
	PartnerAttestationMaxLifetime = 10 * time.Minute
	// PartnerClockSkew is the tolerance between the partner's clock and
	// ours in every time comparison.
	PartnerClockSkew = time.Minute
	// PartnerAttestationMaxBytes bounds an attestation: a Skyfire KYA token
	// with its identity claims is 1-2 KB.
	PartnerAttestationMaxBytes = 8 << 10
	// partnerNameMaxLen and partnerJTIMaxLen bound the partner's name and
	// the token's jti (the columns of partner_attestations).
	partnerNameMaxLen = 64
	partnerJTIMaxLen  = 128
)

// Partner is an identity partner whose attestations verify-partner accepts
// (PARTNERS; `agentpay dev` adds its own, DevPartner).
type Partner struct {
	// Name is what agents send as "partner", and what is recorded.
	Name string
	// Algorithm is PartnerES256 or PartnerEdDSA: the only algorithm its
	// tokens may use.
	Algorithm string
	// Issuer is the iss its tokens carry; "" is Name.
	Issuer string
	// Audience is the aud its tokens must carry; "" is Config.BaseURL.
	Audience string
	// JWKSURL is where its keys are published (fetched when first needed,
	// within jwks's bounds), or Keys are its keys, given at start (a key
	// file read by cmd); exactly one of the two.
	JWKSURL string
	Keys    jwk.Set
}

// partnerVerifier is a configured partner, ready to verify.
type partnerVerifier struct {
	name, issuer, audience string
	alg                    jwa.SignatureAlgorithm
	keys                   jwks.Keys
}

// newPartners checks the configured partners (and the dev partner) and
// builds their verifiers.
func newPartners(cfg Config) (map[string]*partnerVerifier, error) {
	list := slices.Clone(cfg.Partners)
	if cfg.DevPartner != nil {
		list = append(list, cfg.DevPartner.Partner())
	}
	out := make(map[string]*partnerVerifier, len(list))
	for _, p := range list {
		v, err := newPartnerVerifier(p, cfg.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("agentpay: partner %q: %w", p.Name, err)
		}
		if _, dup := out[p.Name]; dup {
			return nil, fmt.Errorf("agentpay: partner %q is configured twice", p.Name)
		}
		out[p.Name] = v
	}
	return out, nil
}

func newPartnerVerifier(p Partner, baseURL string) (*partnerVerifier, error) {
	if err := ValidatePartnerName(p.Name); err != nil {
		return nil, err
	}
	v := &partnerVerifier{name: p.Name, issuer: p.Issuer, audience: p.Audience}
	if v.issuer == "" {
		v.issuer = p.Name
	}
	if v.audience == "" {
		v.audience = baseURL
	}
	if v.audience == "" {
		return nil, errors.New("no audience: set BASE_URL or the partner's audience")
	}
	switch p.Algorithm {
	case PartnerES256:
		v.alg = jwa.ES256()
	case PartnerEdDSA:
		v.alg = jwa.EdDSA()
	default:
		return nil, fmt.Errorf("algorithm must be %s or %s, got %q", PartnerES256, PartnerEdDSA, p.Algorithm)
	}
	switch {
	case (p.JWKSURL == "") == (p.Keys == nil):
		return nil, errors.New("give either a JWKS URL or keys")
	case p.JWKSURL != "":
		v.keys = jwks.NewRemote(jwks.RemoteConfig{URL: p.JWKSURL})
	default:
		keys, err := jwks.NewStatic(p.Keys)
		if err != nil {
			return nil, err
		}
		all, _ := keys.Lookup(context.Background(), "")
		if len(v.usable(all)) == 0 {
			return nil, fmt.Errorf("no key fits %s", p.Algorithm)
		}
		v.keys = keys
	}
	return v, nil
}

// ValidatePartnerName checks a partner's name: 1 to 64 letters, digits,
// '-', '_' or '.'.
func ValidatePartnerName(name string) error {
	if name == "" || len(name) > partnerNameMaxLen {
		return fmt.Errorf("a partner's name is 1 to %d characters", partnerNameMaxLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("a partner's name holds letters, digits, '-', '_' and '.' only, got %q", name)
		}
	}
	return nil
}

// usable are the keys that verify v's algorithm: P-256 keys for ES256,
// Ed25519 keys for EdDSA.
func (v *partnerVerifier) usable(keys []jwk.Key) []jwk.Key {
	var out []jwk.Key
	for _, k := range keys {
		var crv jwa.EllipticCurveAlgorithm
		if err := k.Get(jwk.ECDSACrvKey, &crv); err != nil {
			continue
		}
		switch {
		case v.alg == jwa.ES256() && k.KeyType() == jwa.EC() && crv == jwa.P256():
		case v.alg == jwa.EdDSA() && k.KeyType() == jwa.OKP() && crv == jwa.Ed25519():
		default:
			continue
		}
		if ka, ok := k.Algorithm(); ok && ka.String() != v.alg.String() {
			continue // the key says it is for another algorithm
		}
		out = append(out, k)
	}
	return out
}

// PartnerNames lists the configured partners, sorted.
func (s *Service) PartnerNames() []string {
	names := make([]string, 0, len(s.partners))
	for n := range s.partners {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// VerifyPartnerRequest is an agent's request to link a partner identity.
type VerifyPartnerRequest struct {
	Partner     string
	Attestation string
}

// PartnerVerification is what a verified attestation did.
type PartnerVerification struct {
	AgentID uuid.UUID
	Partner string
	// Before and After are the trust score before and after.
	Before, After int
	Tier          string
	Message       string
}

// VerifyPartner verifies an attestation of a configured partner for the
// agent (the rules above), records it (its jti used once) and the partner
// identity with it, and recomputes the trust score and tier in the same
// transaction. Like a key regeneration it answers once the change holds on
// every instance (the authentication cache's TTL has passed), so the
// agent's next request, wherever it lands, has the new tier's rate and
// send limits.
func (s *Service) VerifyPartner(ctx context.Context, a *ent.Agent, req VerifyPartnerRequest) (*PartnerVerification, error) {
	claims, err := s.verifyAttestation(ctx, a, req)
	if err != nil {
		return nil, err
	}
	out := &PartnerVerification{AgentID: a.ID, Partner: req.Partner}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		cur, err := store.ForUpdate(s.cfg.DB, tx.Agent.Query().Where(agent.ID(a.ID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading agent: %w", err)
		}
		now := s.now().UTC()
		out.Before = ComputeTrust(trustInputsOf(cur, now)).Score()
		if err := tx.PartnerAttestation.Create().
			SetPartner(req.Partner).
			SetJti(claims.jti).
			SetAgentID(a.ID).
			SetSubject(claims.sub).
			SetIssuedAt(claims.iat.UTC()).
			SetExpiresAt(claims.exp.UTC()).
			SetCreatedAt(now).
			SetUpdatedAt(now).
			Exec(ctx); err != nil {
			if isUniqueViolation(err, "partnerattestation_partner_jti", "partner_attestations.partner, partner_attestations.jti") {
				return errAttestationReplayed
			}
			return fmt.Errorf("recording attestation: %w", err)
		}
		cur, err = cur.Update().
			SetPartnerVerified(true).
			SetPartnerProvider(req.Partner).
			SetPartnerSubject(claims.sub).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("storing partner identity: %w", err)
		}
		cur, err = s.storeTrust(ctx, tx.Client(), cur)
		if err != nil {
			return err
		}
		out.After, out.Tier = cur.TrustScore, string(cur.Tier)
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.PartnerVerified, a.PartnerProvider, a.PartnerSubject = true, req.Partner, claims.sub
	a.TrustScore, a.Tier = out.After, agent.Tier(out.Tier)
	out.Message = partnerVerifiedMessage(out)
	// Other instances may serve the agent as it was from their
	// authentication cache until their entry expires: answer once every
	// such entry has, so the next request anywhere sees the new tier.
	s.agentAuth.WaitTTL(ctx)
	return out, nil
}

func partnerVerifiedMessage(v *PartnerVerification) string {
	if v.Before == v.After {
		return fmt.Sprintf("Partner identity verified by %s. Your trust score stays %d (tier %s): a verified partner identity counts once.",
			v.Partner, v.After, v.Tier)
	}
	return fmt.Sprintf("Partner identity verified by %s. Your trust score went from %d to %d: tier %s.",
		v.Partner, v.Before, v.After, v.Tier)
}

var errAttestationReplayed = Invalid("attestation", "has already been used (its jti was accepted before)")

// attestationClaims are the verified claims that are recorded.
type attestationClaims struct {
	sub, jti string
	iat, exp time.Time
}

// identityTypes are the typ headers of an identity attestation (lowercase):
// none, a plain JWT, or a KYA token (Skyfire's kya+JWT, kya+pay+JWT).
var identityTypes = []string{"", "jwt", "kya+jwt", "kya+pay+jwt"}

// verifyAttestation checks everything that needs no database: the
// partner, the signature with the pinned algorithm, and the claims.
func (s *Service) verifyAttestation(ctx context.Context, a *ent.Agent, req VerifyPartnerRequest) (*attestationClaims, error) {
	if req.Partner == "" {
		return nil, Invalid("partner", "is required")
	}
	p, ok := s.partners[req.Partner]
	if !ok {
		if len(req.Partner) > partnerNameMaxLen {
			return nil, Invalid("partner", "is not a configured partner")
		}
		return nil, Invalid("partner", "%q is not a configured partner", req.Partner)
	}
	att := req.Attestation
	switch {
	case att == "":
		return nil, Invalid("attestation", "is required")
	case len(att) > PartnerAttestationMaxBytes:
		return nil, Invalid("attestation", "must be at most %d bytes", PartnerAttestationMaxBytes)
	case !isCompactJWS(att):
		return nil, Invalid("attestation", "must be a JWT in compact form (three base64url parts separated by dots)")
	}
	msg, err := jws.Parse([]byte(att), jws.WithCompact())
	if err != nil || len(msg.Signatures()) != 1 {
		return nil, Invalid("attestation", "is not a well-formed JWT")
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	alg, _ := hdr.Algorithm()
	if alg.String() != p.alg.String() {
		return nil, Invalid("attestation", "alg %q is not accepted: %s signs with %s", alg.String(), p.name, p.alg.String())
	}
	if typ, _ := hdr.Type(); !slices.Contains(identityTypes, strings.ToLower(typ)) {
		return nil, Invalid("attestation", "typ %q is not an identity attestation", typ)
	}
	kid, _ := hdr.KeyID()
	key, err := s.partnerKey(ctx, p, kid)
	if err != nil {
		return nil, err
	}
	if _, err := jws.Verify([]byte(att), jws.WithKey(p.alg, key), jws.WithAlgorithmMatch(true), jws.WithCompact()); err != nil {
		return nil, Invalid("attestation", "signature does not verify with %s's key", p.name)
	}
	tok, err := jwt.ParseInsecure([]byte(att)) // verified just above
	if err != nil {
		return nil, Invalid("attestation", "claims are not a well-formed JWT claims set")
	}
	return p.checkClaims(tok, a.ID, s.now())
}

// partnerKey is the key of p that verifies a token naming kid (none: the
// partner's one key).
func (s *Service) partnerKey(ctx context.Context, p *partnerVerifier, kid string) (jwk.Key, error) {
	keys, err := p.keys.Lookup(ctx, kid)
	switch {
	case errors.Is(err, jwks.ErrUnknownKey):
		if kid == "" {
			return nil, Invalid("attestation", "names no key (kid) and %s has no key for %s", p.name, p.alg.String())
		}
		return nil, Invalid("attestation", "kid %q is not one of %s's keys", kid, p.name)
	case err != nil:
		s.logger.WarnContext(ctx, "partner keys unavailable", "partner", p.name, "err", err)
		return nil, fmt.Errorf("%w: %s's keys cannot be fetched right now; try again later", ErrUnavailable, p.name)
	}
	keys = p.usable(keys)
	switch {
	case len(keys) == 0 && kid != "":
		return nil, Invalid("attestation", "kid %q of %s is not a %s key", kid, p.name, p.alg.String())
	case len(keys) == 0:
		return nil, Invalid("attestation", "names no key (kid) and %s has no key for %s", p.name, p.alg.String())
	case len(keys) > 1:
		return nil, Invalid("attestation", "must name its key (kid): %s has several", p.name)
	}
	return keys[0], nil
}

// checkClaims applies the claim rules (the package comment above) at now.
func (p *partnerVerifier) checkClaims(tok jwt.Token, agentID uuid.UUID, now time.Time) (*attestationClaims, error) {
	bad := func(format string, args ...any) (*attestationClaims, error) {
		return nil, Invalid("attestation", format, args...)
	}
	if iss, _ := tok.Issuer(); iss != p.issuer {
		return bad("iss must be %q", p.issuer)
	}
	if aud, _ := tok.Audience(); !slices.Contains(aud, p.audience) {
		return bad("aud must be %q", p.audience)
	}
	sub, _ := tok.Subject()
	if sub != agentID.String() {
		return bad("sub must be the presenting agent's id")
	}
	exp, ok := tok.Expiration()
	switch {
	case !ok:
		return bad("exp is required")
	case !now.Before(exp.Add(PartnerClockSkew)):
		return bad("has expired (exp %s)", exp.UTC().Format(time.RFC3339))
	case exp.After(now.Add(PartnerAttestationMaxLifetime + PartnerClockSkew)):
		return bad("exp is too far ahead: an attestation expires within %s", PartnerAttestationMaxLifetime)
	}
	iat, ok := tok.IssuedAt()
	switch {
	case !ok:
		return bad("iat is required")
	case iat.After(now.Add(PartnerClockSkew)):
		return bad("iat is in the future")
	case exp.Sub(iat) > PartnerAttestationMaxLifetime:
		return bad("lives too long (exp - iat): an attestation lives at most %s", PartnerAttestationMaxLifetime)
	}
	if nbf, ok := tok.NotBefore(); ok && nbf.After(now.Add(PartnerClockSkew)) {
		return bad("is not valid yet (nbf)")
	}
	jti, _ := tok.JwtID()
	switch {
	case jti == "":
		return bad("jti is required")
	case len(jti) > partnerJTIMaxLen:
		return bad("jti must be at most %d characters", partnerJTIMaxLen)
	}
	return &attestationClaims{sub: sub, jti: jti, iat: iat, exp: exp}, nil
}

// isCompactJWS reports whether s is three base64url parts, the header not
// empty (an empty signature is left to the alg check, which refuses none).
func isCompactJWS(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" {
		return false
	}
	for _, part := range parts {
		for i := range len(part) {
			c := part[i]
			if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
