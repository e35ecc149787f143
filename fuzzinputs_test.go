package agentpay

// Fuzz targets of the credentials and payment inputs that reach the
// service from outside: sign-in and invitation tokens, x402 payment
// headers, EIP-3009 authorizations, partner attestations (JWTs). Seeds are
// in testdata/fuzz/<target>; `make fuzz` runs each target
// (docs/testing.md).

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/internal/testenv"
	"agentpay/internal/vault"
	"agentpay/x402"
)

// FuzzAccountTokens: the lookups behind a sign-in link's page
// (CheckSignInLink: GET /app/signin/{token}) and an invitation's
// (Invitation: GET /app/invite/{token}, acceptInvitation), on a real
// database holding one live sign-in link, one e-mailed invitation and one
// agent's invite code. In the input, {signin}, {invitation} and {code}
// stand for those real tokens, so the fuzzer works around them (a
// character more or less, another case, spaces) as well as on any text. A
// lookup succeeds exactly when the input is the real token of its kind
// and answers its own record; every refusal is the not-found answer, never
// another error.
func FuzzAccountTokens(f *testing.F) {
	env := testenv.New(f, testenv.Options{})
	svc := newTestService(f, env, Config{})
	ctx := context.Background()
	reg, err := svc.QuickRegister(ctx, "fuzz_tokens")
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now().UTC()
	signIn, invitationToken, code := vault.SignInToken.New(), vault.InvitationToken.New(), reg.Agent.InviteCode
	if err := env.DB.Ent.LoginToken.Create().SetEmail("link@example.com").SetTokenHash(vault.HashSecret(signIn)).
		SetExpiresAt(now.Add(24 * time.Hour)).SetCreatedAt(now).SetUpdatedAt(now).Exec(ctx); err != nil {
		f.Fatal(err)
	}
	if err := env.DB.Ent.Invitation.Create().SetAgentID(reg.Agent.ID).SetEmail("invited@example.com").
		SetDay(now.Format(time.DateOnly)).SetTokenHash(vault.HashSecret(invitationToken)).
		SetExpiresAt(now.Add(24 * time.Hour)).SetCreatedAt(now).SetUpdatedAt(now).Exec(ctx); err != nil {
		f.Fatal(err)
	}
	real := strings.NewReplacer("{signin}", signIn, "{invitation}", invitationToken, "{code}", code)
	f.Fuzz(func(t *testing.T, input string) {
		token := real.Replace(input)
		link, err := svc.CheckSignInLink(ctx, token)
		switch {
		case (err == nil) != (token == signIn):
			t.Fatalf("sign-in link %q: %v", token, err)
		case err != nil && !errors.Is(err, ErrSignInLinkInvalid):
			t.Fatalf("sign-in link %q: %v is not the invalid link's answer", token, err)
		case err == nil && link.Email != "link@example.com":
			t.Fatalf("sign-in link answered %q", link.Email)
		}
		info, err := svc.Invitation(ctx, token)
		switch {
		case (err == nil) != (token == invitationToken || token == code):
			t.Fatalf("invitation %q: %v", token, err)
		case err != nil && !errors.Is(err, ErrNotFound):
			t.Fatalf("invitation %q: %v is not the not-found answer", token, err)
		case err == nil && info.Agent.ID != reg.Agent.ID:
			t.Fatalf("invitation %q answered agent %s", token, info.Agent.ID)
		case err == nil && (info.Invitation != nil) != (token == invitationToken):
			t.Fatalf("invitation %q answered the wrong kind", token)
		}
	})
}

// x402HeaderDecoders are the payment headers the service reads, one entry
// per x402 version, as FuzzX402PaymentHeader runs them (its version input
// picks the entry): supporting a newer version is one more entry here and
// seeds naming its index. envelope is the rule the entry's accepted
// envelope keeps, written independently of its request method: the
// version, the scheme, and the network its mode names for the chain.
var x402HeaderDecoders = []struct {
	header   string
	decode   func(string) (x402FuzzPayload, error)
	request  func(p x402FuzzPayload, externalID string, mode Mode) (AuthorizedPaymentRequest, error)
	envelope func(p x402FuzzPayload, chain chains.Name, mode Mode) bool
}{
	{ // v1: base64 of the payment payload's JSON
		"X-PAYMENT",
		func(h string) (x402FuzzPayload, error) { return DecodeX402Payment(h) },
		func(p x402FuzzPayload, externalID string, mode Mode) (AuthorizedPaymentRequest, error) {
			return x402RequestV1(p.(*x402.PaymentPayloadV1), externalID, mode)
		},
		func(p x402FuzzPayload, chain chains.Name, mode Mode) bool {
			v := p.(*x402.PaymentPayloadV1)
			return v.X402Version == 1 && v.Scheme == "exact" && x402Networks[chain][mode] == v.Network
		},
	},
	{ // v2: base64 of the payment payload's JSON, the accepted requirement echoed
		"PAYMENT-SIGNATURE",
		func(h string) (x402FuzzPayload, error) { return DecodeX402PaymentV2(h) },
		func(p x402FuzzPayload, externalID string, mode Mode) (AuthorizedPaymentRequest, error) {
			return x402RequestV2(p.(*x402.PaymentPayload), externalID, mode)
		},
		func(p x402FuzzPayload, chain chains.Name, mode Mode) bool {
			v := p.(*x402.PaymentPayload)
			return v.X402Version == 2 && v.Accepted.Scheme == "exact" &&
				v.Accepted.Network == fmt.Sprintf("eip155:%d", x402CAIP2[chain][mode]) &&
				strings.TrimSpace(v.Payload.Authorization.Value) == v.Accepted.Amount &&
				strings.EqualFold(strings.TrimSpace(v.Payload.Authorization.To), strings.TrimSpace(v.Accepted.PayTo))
		},
	},
}

// x402FuzzPayload is a decoded payment header of any version.
type x402FuzzPayload any

// FuzzX402PaymentHeader: a payment header is decoded or refused with a
// validation error naming it, within x402.MaxHeaderBytes; what decodes
// encodes back to the same payload; its envelope (version, scheme, network
// of the session's mode) is checked with validation errors, and the
// authorization it carries parses as the relay reads it
// (FuzzTransferAuthorization's rules) before anything touches a database
// or a chain.
func FuzzX402PaymentHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, version uint8, header string, live bool) {
		d := x402HeaderDecoders[int(version)%len(x402HeaderDecoders)]
		p, err := d.decode(header)
		requireFieldError(t, err, d.header)
		if err != nil {
			return
		}
		if len(header) > x402.MaxHeaderBytes {
			t.Fatalf("decoded a %d-byte header", len(header))
		}
		if body, err := json.Marshal(p); err == nil && base64.StdEncoding.EncodedLen(len(body)) <= x402.MaxHeaderBytes {
			again, err := d.decode(base64.StdEncoding.EncodeToString(body))
			if err != nil || !reflect.DeepEqual(p, again) {
				t.Fatalf("%s: the payload %s does not decode back to itself: %v", d.header, body, err)
			}
		}
		mode := ModeTest
		if live {
			mode = ModeLive
		}
		req, err := d.request(p, "cs_test_fuzz", mode)
		if err != nil {
			if !IsValidation(err) {
				t.Fatalf("envelope refused with %v", err)
			}
			return
		}
		if !d.envelope(p, chains.Name(req.Chain), mode) {
			t.Fatalf("%s: accepted the envelope of %+v in %s mode as %s", d.header, p, mode, req.Chain)
		}
		if _, err := req.Authorization.parse(); err != nil && !IsValidation(err) {
			t.Fatalf("authorization refused with %v", err)
		}
	})
}

// maxUint256 is 2^256 - 1.
var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// FuzzTransferAuthorization: an EIP-3009 authorization as JSON carries it
// (x402's payload, the browser wallet's typed-data message) is read by the
// relay's parse into the chain's form, each field bounded, or refused with
// a validation error naming the field: addresses are 0x and 40 hex
// digits, amounts and times decimal uint256s read exactly, the nonce 32
// bytes and the signature 65, each what its hex spells.
func FuzzTransferAuthorization(f *testing.F) {
	fields := []string{"authorization.from", "authorization.to", "authorization.value", "authorization.validAfter",
		"authorization.validBefore", "authorization.nonce", "signature"}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in TransferAuthorization
		if json.Unmarshal(body, &in) != nil {
			return
		}
		a, err := in.parse()
		if err != nil {
			var verr *ValidationError
			if !errors.As(err, &verr) || !slices.Contains(fields, verr.Field) {
				t.Fatalf("refused with %v, not a validation error on an authorization field", err)
			}
			return
		}
		for _, addr := range []struct{ got, sent string }{{a.From, in.From}, {a.To, in.To}} {
			if len(addr.got) != 42 || addr.got[:2] != "0x" || addr.got != strings.TrimSpace(addr.sent) {
				t.Fatalf("address %q read as %q", addr.sent, addr.got)
			}
			if _, err := hex.DecodeString(addr.got[2:]); err != nil {
				t.Fatalf("address %q is not hex", addr.got)
			}
		}
		for _, n := range []struct {
			got  *big.Int
			sent string
		}{{a.Value, in.Value}, {a.ValidAfter, in.ValidAfter}, {a.ValidBefore, in.ValidBefore}} {
			want, ok := new(big.Int).SetString(strings.TrimSpace(n.sent), 10)
			if !ok || n.got.Cmp(want) != 0 || n.got.Sign() < 0 || n.got.Cmp(maxUint256) > 0 || strings.ContainsAny(n.sent, "+-_xXeE.") {
				t.Fatalf("number %q read as %v", n.sent, n.got)
			}
		}
		nonce, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(in.Nonce), "0x"))
		if err != nil || !slices.Equal(nonce, a.Nonce[:]) {
			t.Fatalf("nonce %q read as %x", in.Nonce, a.Nonce)
		}
		sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(in.Signature), "0x"))
		if err != nil || len(a.Signature) != 65 || !slices.Equal(sig, a.Signature) {
			t.Fatalf("signature %q read as %x", in.Signature, a.Signature)
		}
	})
}

// The partner FuzzPartnerAttestation verifies for: its key, name, issuer
// and audience, the agent presenting, and the service's clock.
const (
	fuzzPartnerName     = "fuzz-partner"
	fuzzPartnerKID      = "k1"
	fuzzPartnerAudience = "https://agentpay.test"
	fuzzAgentID         = "11111111-2222-4333-8444-555555555555"
)

var fuzzPartnerNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// FuzzPartnerAttestation: verify-partner's attestation (a JWT) is verified
// with the partner's pinned algorithm and key and its claims checked, or
// refused with a validation error on attestation, never another error or
// a panic. The input is a token as sent (mode 0), or a header's typ and kid
// with claims that the target signs with the partner's key (mode 1) or
// another key (mode 2), so the fuzzer reaches the claim rules behind a
// valid signature. An accepted token is one signed by the partner's key
// whose claims (read again with encoding/json) name the partner as iss,
// the service as aud and the presenting agent as sub, carry a jti of at
// most 128 characters and an iat and exp (numbers, or jwx's numeric
// strings) that make it live now and at most PartnerAttestationMaxLifetime.
func FuzzPartnerAttestation(f *testing.F) {
	env := testenv.New(f, testenv.Options{Clock: fuzzPartnerNow})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	pub, err := jwk.Import(&key.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	if err := pub.Set(jwk.KeyIDKey, fuzzPartnerKID); err != nil {
		f.Fatal(err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		f.Fatal(err)
	}
	svc := newTestService(f, env, Config{Partners: []Partner{{
		Name: fuzzPartnerName, Algorithm: PartnerES256, Audience: fuzzPartnerAudience, Keys: set,
	}}})
	presenter := &ent.Agent{ID: uuid.MustParse(fuzzAgentID)}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, mode uint8, raw, typ, kid string, claims []byte) {
		att := raw
		if m := mode % 3; m != 0 {
			signer := key
			if m == 2 {
				signer = other
			}
			att = signES256(t, signer, typ, kid, claims)
		}
		got, err := svc.verifyAttestation(ctx, presenter, VerifyPartnerRequest{Partner: fuzzPartnerName, Attestation: att})
		if err != nil {
			requireFieldError(t, err, "attestation")
			return
		}
		if mode%3 != 1 {
			t.Fatalf("accepted a token the partner's key did not sign: %q", att)
		}
		dec := json.NewDecoder(bytes.NewReader(claims))
		dec.UseNumber()
		var c map[string]any
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("accepted claims encoding/json does not read: %q (%v)", claims, err)
		}
		str := func(name string) string { s, _ := c[name].(string); return s }
		// A NumericDate is a number; jwx also reads one written as a
		// string of digits, which the time rules then hold as well.
		num := func(name string) (float64, bool) {
			var n json.Number
			switch v := c[name].(type) {
			case json.Number:
				n = v
			case string:
				n = json.Number(v)
			default:
				return 0, false
			}
			v, err := n.Float64()
			return v, err == nil
		}
		audOK := str("aud") == fuzzPartnerAudience
		if list, ok := c["aud"].([]any); ok {
			for _, a := range list {
				audOK = audOK || a == any(fuzzPartnerAudience)
			}
		}
		exp, expOK := num("exp")
		iat, iatOK := num("iat")
		now := float64(fuzzPartnerNow.Unix())
		skew, life := PartnerClockSkew.Seconds(), PartnerAttestationMaxLifetime.Seconds()
		switch {
		case str("iss") != fuzzPartnerName || !audOK || str("sub") != fuzzAgentID:
			t.Fatalf("accepted iss %v, aud %v, sub %v", c["iss"], c["aud"], c["sub"])
		case str("jti") == "" || len(str("jti")) > 128 || got.jti != str("jti") || got.sub != fuzzAgentID:
			t.Fatalf("accepted jti %v (recorded %q)", c["jti"], got.jti)
		case !expOK || !iatOK || now >= exp+skew+1 || exp > now+life+skew+1 || iat > now+skew+1 || exp-iat > life+1:
			t.Fatalf("accepted iat %v and exp %v at %v", c["iat"], c["exp"], now)
		}
	})
}

// signES256 is a compact JWS of claims with a header of alg ES256 and the
// typ and kid given (left out when empty), signed by key.
func signES256(t *testing.T, key *ecdsa.PrivateKey, typ, kid string, claims []byte) string {
	hdr := map[string]string{"alg": "ES256"}
	if typ != "" {
		hdr["typ"] = typ
	}
	if kid != "" {
		hdr["kid"] = kid
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}
