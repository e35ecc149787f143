package rest

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/partnerattestation"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// testPartner is an identity partner of the tests: an ES256 key whose
// public half is served as a JWKS over real HTTP on loopback (hits counts
// the fetches), or an EdDSA key given at start as a key file would be.
type testPartner struct {
	name, issuer, kid string
	alg               jwa.SignatureAlgorithm
	priv              any // *ecdsa.PrivateKey or ed25519.PrivateKey
	pub               any
	jwks              *httptest.Server
	hits              atomic.Int32
}

func newES256Partner(t *testing.T, name, issuer, kid string) *testPartner {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p := &testPartner{name: name, issuer: issuer, kid: kid, alg: jwa.ES256(), priv: priv, pub: &priv.PublicKey}
	set := publicSet(t, &priv.PublicKey, kid)
	p.jwks = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		require.NoError(t, json.NewEncoder(w).Encode(set))
	}))
	t.Cleanup(p.jwks.Close)
	return p
}

func newEdDSAPartner(t *testing.T, name string) *testPartner {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return &testPartner{name: name, issuer: name, kid: "ed1", alg: jwa.EdDSA(), priv: priv, pub: pub}
}

func publicSet(t *testing.T, pub any, kid string) jwk.Set {
	t.Helper()
	k, err := jwk.Import(pub)
	require.NoError(t, err)
	require.NoError(t, k.Set(jwk.KeyIDKey, kid))
	set := jwk.NewSet()
	require.NoError(t, set.AddKey(k))
	return set
}

// config is the partner as PARTNERS configures it.
func (p *testPartner) config(t *testing.T) agentpay.Partner {
	c := agentpay.Partner{Name: p.name, Issuer: p.issuer, Algorithm: p.alg.String()}
	if p.jwks != nil {
		c.JWKSURL = p.jwks.URL + "/.well-known/jwks.json"
	} else {
		c.Keys = publicSet(t, p.pub, p.kid)
	}
	return c
}

// claims are a good attestation's claims for an agent.
func (p *testPartner) claims(agentID string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": p.issuer, "aud": testenv.BaseURL, "sub": agentID,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": uuid.NewString(),
	}
}

// sign signs claims with the partner's key and algorithm.
func (p *testPartner) sign(t *testing.T, claims map[string]any, header map[string]any) string {
	t.Helper()
	return signJWS(t, p.alg, p.priv, p.kid, claims, header)
}

func signJWS(t *testing.T, alg jwa.SignatureAlgorithm, key any, kid string, claims, header map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	h := jws.NewHeaders()
	require.NoError(t, h.Set(jws.KeyIDKey, kid))
	require.NoError(t, h.Set(jws.TypeKey, "JWT"))
	for k, v := range header {
		require.NoError(t, h.Set(k, v))
	}
	out, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	require.NoError(t, err)
	return string(out)
}

// unsigned is claims under {"alg":"none"}: no signature at all.
func unsigned(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
}

func withClaims(c map[string]any, set map[string]any, drop ...string) map[string]any {
	out := map[string]any{}
	for k, v := range c {
		out[k] = v
	}
	for k, v := range set {
		out[k] = v
	}
	for _, k := range drop {
		delete(out, k)
	}
	return out
}

// partnerAPI is an API instance (on db, when given) that knows the
// partners.
func partnerAPI(t *testing.T, api *testAPI, partners ...*testPartner) *testAPI {
	cfg := agentpay.Config{}
	for _, p := range partners {
		cfg.Partners = append(cfg.Partners, p.config(t))
	}
	tc := testAPIConfig{Config: cfg}
	if api != nil {
		tc.DB = api.DB
	}
	return newTestAPI(t, tc)
}

// requireUnverified checks that nothing changed for the agent: no
// partner identity, score 0, no attestation recorded.
func requireUnverified(t *testing.T, api *testAPI, id string) {
	t.Helper()
	ctx := context.Background()
	a, err := api.DB.Ent.Agent.Get(ctx, uuid.MustParse(id))
	require.NoError(t, err)
	require.False(t, a.PartnerVerified)
	require.Empty(t, a.PartnerProvider)
	require.Equal(t, 0, a.TrustScore)
	require.Equal(t, "T0", string(a.Tier))
	n, err := api.DB.Ent.PartnerAttestation.Query().Where(partnerattestation.AgentID(a.ID)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

func verifyPartnerBodyOf(partner, attestation string) map[string]any {
	return map[string]any{"partner": partner, "attestation": attestation}
}

// Every refusal is 400 with its reason, and changes nothing.
func TestVerifyPartnerRefusals(t *testing.T) {
	t.Parallel()
	good := newES256Partner(t, "acme", "https://id.acme.test", "k1")
	ed := newEdDSAPartner(t, "edpartner")
	api := partnerAPI(t, nil, good, ed)
	other := api.register("partner_other")

	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(good.pub)
	require.NoError(t, err)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	now := time.Now()

	for _, tc := range []struct {
		name    string
		partner string
		token   func(agentID string) string
		body    any // instead of partner and token
		detail  string
	}{
		{name: "forged signature (another key, the partner's kid)", token: func(id string) string {
			return signJWS(t, jwa.ES256(), forger, "k1", good.claims(id), nil)
		}, detail: "attestation: signature does not verify with acme's key"},
		{name: "expired", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"iat": now.Add(-8 * time.Minute).Unix(), "exp": now.Add(-2 * time.Minute).Unix()}), nil)
		}, detail: "attestation: has expired"},
		{name: "exp too far ahead", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"exp": now.Add(time.Hour).Unix()}), nil)
		}, detail: "attestation: exp is too far ahead: an attestation expires within 10m0s"},
		{name: "lives too long", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"iat": now.Add(-time.Hour).Unix()}), nil)
		}, detail: "attestation: lives too long"},
		{name: "iat in the future", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"iat": now.Add(5 * time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix()}), nil)
		}, detail: "attestation: iat is in the future"},
		{name: "nbf in the future", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"nbf": now.Add(4 * time.Minute).Unix()}), nil)
		}, detail: "attestation: is not valid yet (nbf)"},
		{name: "no exp", token: func(id string) string { return good.sign(t, withClaims(good.claims(id), nil, "exp"), nil) },
			detail: "attestation: exp is required"},
		{name: "no iat", token: func(id string) string { return good.sign(t, withClaims(good.claims(id), nil, "iat"), nil) },
			detail: "attestation: iat is required"},
		{name: "no jti", token: func(id string) string { return good.sign(t, withClaims(good.claims(id), nil, "jti"), nil) },
			detail: "attestation: jti is required"},
		{name: "jti too long", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"jti": strings.Repeat("j", 129)}), nil)
		}, detail: "attestation: jti must be at most 128 characters"},
		{name: "wrong audience", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"aud": "https://elsewhere.test"}), nil)
		}, detail: `attestation: aud must be "http://api.test"`},
		{name: "wrong issuer", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"iss": "acme"}), nil)
		}, detail: `attestation: iss must be "https://id.acme.test"`},
		{name: "another agent's id as sub", token: func(string) string { return good.sign(t, good.claims(other.ID), nil) },
			detail: "attestation: sub must be the presenting agent's id"},
		{name: "HS256 signed with the partner's public key", token: func(id string) string {
			return signJWS(t, jwa.HS256(), pubPEM, "k1", good.claims(id), nil)
		}, detail: `attestation: alg "HS256" is not accepted: acme signs with ES256`},
		{name: "alg none", token: func(id string) string { return unsigned(t, good.claims(id)) },
			detail: `attestation: alg "none" is not accepted: acme signs with ES256`},
		{name: "RS256 when ES256 is pinned", token: func(id string) string {
			return signJWS(t, jwa.RS256(), rsaKey, "k1", good.claims(id), nil)
		}, detail: `attestation: alg "RS256" is not accepted: acme signs with ES256`},
		{name: "ES256 when EdDSA is pinned", partner: "edpartner", token: func(id string) string {
			return signJWS(t, jwa.ES256(), good.priv, "ed1", withClaims(good.claims(id), map[string]any{"iss": "edpartner"}), nil)
		}, detail: `attestation: alg "ES256" is not accepted: edpartner signs with EdDSA`},
		{name: "unknown kid", token: func(id string) string {
			return signJWS(t, jwa.ES256(), good.priv, "k9", good.claims(id), nil)
		}, detail: `attestation: kid "k9" is not one of acme's keys`},
		{name: "a payment token, not an identity attestation", token: func(id string) string {
			return good.sign(t, good.claims(id), map[string]any{jws.TypeKey: "pay+JWT"})
		}, detail: `attestation: typ "pay+JWT" is not an identity attestation`},
		{name: "unknown partner", partner: "nobody", token: func(id string) string { return good.sign(t, good.claims(id), nil) },
			detail: `partner: "nobody" is not a configured partner`},
		{name: "malformed JWT", token: func(string) string { return "not.a.jwt" },
			detail: "attestation: is not a well-formed JWT"},
		{name: "not a compact JWT", token: func(string) string { return `{"payload":"e30","signatures":[]}` },
			detail: "attestation: must be a JWT in compact form"},
		{name: "oversize attestation", token: func(id string) string {
			return good.sign(t, withClaims(good.claims(id), map[string]any{"pad": strings.Repeat("x", 9000)}), nil)
		}, detail: "attestation: must be at most 8192 bytes"},
		{name: "no attestation", body: map[string]any{"partner": "acme"}, detail: "attestation: is required"},
		{name: "no partner", body: map[string]any{"attestation": "a.b.c"}, detail: "partner: is required"},
		{name: "unknown field", body: map[string]any{"partner": "acme", "attestation": "a.b.c", "alg": "none"}, detail: "unknown field"},
		{name: "malformed body", body: `{"partner":`, detail: "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := api.register("p_" + strings.ReplaceAll(uuid.NewString()[:8], "-", ""))
			body := tc.body
			if body == nil {
				partner := tc.partner
				if partner == "" {
					partner = "acme"
				}
				body = verifyPartnerBodyOf(partner, tc.token(a.ID))
			}
			res := api.do(http.MethodPost, "/agents/me/verify-partner", body, agentKey(a.APIKey))
			require.Equal(t, http.StatusBadRequest, res.Status, string(res.Body))
			require.Contains(t, res.Map(t)["detail"], tc.detail)
			requireUnverified(t, api, a.ID)
		})
	}

	// A body over the API's 1 MiB bound is 413, as on every route.
	a := api.register("partner_huge")
	res := api.do(http.MethodPost, "/agents/me/verify-partner",
		verifyPartnerBodyOf("acme", strings.Repeat("a", 2<<20)), agentKey(a.APIKey))
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status)
	requireUnverified(t, api, a.ID)
	// Unauthenticated: 401.
	res = api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", "a.b.c"), nil)
	require.Equal(t, http.StatusUnauthorized, res.Status)
}

// A good attestation raises the score by the partner's points and the
// tier, and the agent's next request has the new tier's send and rate
// limits; the same attestation again is a replay.
func TestVerifyPartner(t *testing.T) {
	t.Parallel()
	p := newES256Partner(t, "acme", "https://id.acme.test", "k1")
	api := partnerAPI(t, nil, p)
	a := api.register("partner_alice")

	res := api.do(http.MethodPost, "/agents/me/wallet/send",
		map[string]any{"to_username": "nobody_here", "amount_usd": 500}, agentKey(a.APIKey))
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Contains(t, res.Map(t)["detail"], "per-send limit of 100 USD of tier T0")
	require.Equal(t, "10", res.Header.Get("X-RateLimit-Limit"))

	token := p.sign(t, p.claims(a.ID), nil)
	res = api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", token), agentKey(a.APIKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	assertGolden(t, "verify_partner", res.Body, nil)
	var got verifyPartnerBody
	res.JSON(t, &got)
	require.Equal(t, verifyPartnerBody{AgentID: a.ID, Partner: "acme", Verified: true,
		TrustScore: trustScoreChange{Before: 0, After: agentpay.TrustPartnerPoints}, Tier: "T1",
		Message: "Partner identity verified by acme. Your trust score went from 0 to 30: tier T1."}, got)

	// The next request: T1's 1,000 USD per send (500 passes the limit and
	// meets the unknown recipient) and 30 requests a minute.
	res = api.do(http.MethodPost, "/agents/me/wallet/send",
		map[string]any{"to_username": "nobody_here", "amount_usd": 500}, agentKey(a.APIKey))
	require.Equal(t, http.StatusNotFound, res.Status, string(res.Body))
	require.Equal(t, "30", res.Header.Get("X-RateLimit-Limit"))
	res = api.do(http.MethodGet, "/agents/me/limits", nil, agentKey(a.APIKey))
	require.Equal(t, http.StatusOK, res.Status)
	limits := res.Map(t)
	require.Equal(t, "T1", limits["tier"])
	require.Contains(t, string(res.Body), `"action":"verify_partner","points":30,"earned":30,"done":true`)

	ag, err := api.DB.Ent.Agent.Get(context.Background(), uuid.MustParse(a.ID))
	require.NoError(t, err)
	require.True(t, ag.PartnerVerified)
	require.Equal(t, "acme", ag.PartnerProvider)
	require.Equal(t, a.ID, ag.PartnerSubject)

	// The same token again: a replay, refused, nothing more recorded.
	res = api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", token), agentKey(a.APIKey))
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Equal(t, "attestation: has already been used (its jti was accepted before)", res.Map(t)["detail"])
	n, err := api.DB.Ent.PartnerAttestation.Query().Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// A fresh attestation verifies again; the points count once.
	res = api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", p.sign(t, p.claims(a.ID), nil)), agentKey(a.APIKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	res.JSON(t, &got)
	require.Equal(t, trustScoreChange{Before: 30, After: 30}, got.TrustScore)
	require.Equal(t, "T1", got.Tier)
	// The JWKS was fetched once for all of it.
	require.Equal(t, int32(1), p.hits.Load())
}

// Two requests with one attestation at once: one wins, the other is a
// replay, and the points count once.
func TestVerifyPartnerConcurrentReplay(t *testing.T) {
	t.Parallel()
	p := newES256Partner(t, "acme", "acme", "k1")
	api := partnerAPI(t, nil, p)
	a := api.register("partner_race")
	token := p.sign(t, p.claims(a.ID), nil)
	const n = 4
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest(http.MethodPost, api.Server.URL+"/agents/me/verify-partner",
				strings.NewReader(`{"partner":"acme","attestation":"`+token+`"}`))
			if err != nil {
				return
			}
			req.Header.Set("X-Agent-Key", a.APIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			won++
		case http.StatusBadRequest:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	require.Equal(t, 1, won, "statuses %v", statuses)
	count, err := api.DB.Ent.PartnerAttestation.Query().Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, count)
	ag, err := api.DB.Ent.Agent.Get(context.Background(), uuid.MustParse(a.ID))
	require.NoError(t, err)
	require.Equal(t, agentpay.TrustPartnerPoints, ag.TrustScore)
}

// Verified through one instance, the agent's next request through another
// (which had the agent in its authentication cache) has the new tier; the
// same attestation presented to the other instance is a replay.
func TestVerifyPartnerAcrossInstances(t *testing.T) {
	t.Parallel()
	if !testdb.IsPostgres() {
		t.Skip("instances share a database on PostgreSQL; on SQLite the API is one process")
	}
	p := newES256Partner(t, "acme", "acme", "k1")
	api1 := partnerAPI(t, nil, p)
	api2 := partnerAPI(t, api1, p)
	a := api1.register("partner_two")
	// api2 reads the agent (T0) into its cache.
	res := api2.do(http.MethodPost, "/agents/me/wallet/send",
		map[string]any{"to_username": "nobody_here", "amount_usd": 500}, agentKey(a.APIKey))
	require.Equal(t, http.StatusForbidden, res.Status)
	require.Equal(t, "10", res.Header.Get("X-RateLimit-Limit"))

	token := p.sign(t, p.claims(a.ID), nil)
	res = api1.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", token), agentKey(a.APIKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))

	res = api2.do(http.MethodPost, "/agents/me/wallet/send",
		map[string]any{"to_username": "nobody_here", "amount_usd": 500}, agentKey(a.APIKey))
	require.Equal(t, http.StatusNotFound, res.Status, string(res.Body))
	require.Equal(t, "30", res.Header.Get("X-RateLimit-Limit"))
	res = api2.do(http.MethodGet, "/agents/me/limits", nil, agentKey(a.APIKey))
	require.Equal(t, "T1", res.Map(t)["tier"])

	res = api2.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", token), agentKey(a.APIKey))
	require.Equal(t, http.StatusBadRequest, res.Status)
	require.Contains(t, res.Map(t)["detail"], "has already been used")
}

// A token shaped like Skyfire's KYA token (docs.skyfire.xyz, Token
// Schemas: header typ kya+JWT, kid "0"; Skyfire's claims ver, env, ssi,
// btg, sdm, srl, scopes, bid, apd, aid beside the registered ones)
// verifies when the partner is configured with Skyfire's issuer; and an
// EdDSA partner whose keys are given at start.
func TestVerifyPartnerKYAAndEdDSA(t *testing.T) {
	t.Parallel()
	sky := newES256Partner(t, "skyfire", "https://app.skyfire.xyz", "0")
	ed := newEdDSAPartner(t, "edpartner")
	api := partnerAPI(t, nil, sky, ed)

	a := api.register("partner_kya")
	claims := withClaims(sky.claims(a.ID), map[string]any{
		"ver": "1", "env": "production", "btg": uuid.NewString(), "ssi": uuid.NewString(),
		"sdm": "https://api.test", "srl": "https://api.test/agents/me/verify-partner", "scopes": []string{},
		"bid": map[string]any{"email": "owner@example.com"},
		"apd": map[string]any{"id": uuid.NewString(), "name": "Acme Shopping Agents"},
		"aid": map[string]any{"creation_ip": "203.0.113.7", "source_ips": []string{"203.0.113.7"}},
	})
	token := sky.sign(t, claims, map[string]any{jws.TypeKey: "kya+JWT"})
	res := api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("skyfire", token), agentKey(a.APIKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	require.Equal(t, "T1", res.Map(t)["tier"])

	b := api.register("partner_ed")
	res = api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("edpartner", ed.sign(t, ed.claims(b.ID), nil)), agentKey(b.APIKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	require.Equal(t, "edpartner", res.Map(t)["partner"])
}

// A partner whose keys cannot be fetched is 503, and nothing changes.
func TestVerifyPartnerKeysUnavailable(t *testing.T) {
	t.Parallel()
	p := newES256Partner(t, "acme", "acme", "k1")
	p.jwks.Close()
	api := partnerAPI(t, nil, p)
	a := api.register("partner_down")
	res := api.do(http.MethodPost, "/agents/me/verify-partner", verifyPartnerBodyOf("acme", p.sign(t, p.claims(a.ID), nil)), agentKey(a.APIKey))
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Contains(t, res.Map(t)["detail"], "acme's keys cannot be fetched right now")
	requireUnverified(t, api, a.ID)
}
