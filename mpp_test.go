package agentpay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"
)

// specChallengeID is draft-httpauth-payment-00's recommended binding,
// written from the draft's pseudo-code: seven positional slots joined by
// "|", absent ones empty, HMAC-SHA256, base64url without padding.
func specChallengeID(secret []byte, realm, method, intent, request, expires, digest, opaque string) string {
	input := strings.Join([]string{realm, method, intent, request, expires, digest, opaque}, "|")
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(input))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestMPPChallengeID: the id binds every parameter in its slot, as the
// draft computes it; moving a value to another slot changes it.
func TestMPPChallengeID(t *testing.T) {
	key := []byte("k")
	base := MPPChallenge{Realm: "api.example.com", Method: "evm", Intent: "charge", Request: "eyJhIjoiMSJ9", Expires: "2026-01-15T12:05:00Z"}
	want := specChallengeID(key, base.Realm, base.Method, base.Intent, base.Request, base.Expires, "", "")
	require.Equal(t, want, mppChallengeID(key, base))
	seen := map[string]string{want: "base"}
	for _, tc := range []struct {
		name   string
		change func(c *MPPChallenge)
	}{
		{"realm", func(c *MPPChallenge) { c.Realm = "other.example.com" }},
		{"method", func(c *MPPChallenge) { c.Method = "tempo" }},
		{"intent", func(c *MPPChallenge) { c.Intent = "session" }},
		{"request", func(c *MPPChallenge) { c.Request = "eyJhIjoiMiJ9" }},
		{"expires", func(c *MPPChallenge) { c.Expires = "2026-01-15T13:05:00Z" }},
		{"expires as digest", func(c *MPPChallenge) { c.Digest, c.Expires = c.Expires, "" }},
		{"opaque", func(c *MPPChallenge) { c.Opaque = "eyJ4IjoieSJ9" }},
	} {
		c := base
		tc.change(&c)
		id := mppChallengeID(key, c)
		require.Equal(t, specChallengeID(key, c.Realm, c.Method, c.Intent, c.Request, c.Expires, c.Digest, c.Opaque), id, tc.name)
		require.NotContains(t, seen, id, "%s binds like %s", tc.name, seen[id])
		seen[id] = tc.name
	}
	require.NotEqual(t, want, mppChallengeID([]byte("another key"), base))
}

// TestMPPChallengeHash: the nonce an authorization must carry is
// keccak256 of the id and realm concatenated (draft-evm-charge-00;
// mppx's Types.challengeHash).
func TestMPPChallengeHash(t *testing.T) {
	got := MPPChallengeHash("aB3cDeF4gHiJkLmN", "api.example.com")
	require.Equal(t, crypto.Keccak256([]byte("aB3cDeF4gHiJkLmNapi.example.com")), got[:])
	other := MPPChallengeHash("aB3cDeF4gHiJkLm", "Napi.example.com")
	require.Equal(t, got, other, "plain concatenation, as the draft's abi.encodePacked of two strings")
	require.NotEqual(t, got, MPPChallengeHash("aB3cDeF4gHiJkLmN", "api.example.org"))
}

// TestCanonicalJSON: requests are JCS-encoded (sorted keys, no spaces,
// no HTML escaping), so a client's re-serialization is byte-equal.
func TestCanonicalJSON(t *testing.T) {
	raw, err := canonicalJSON(MPPChargeRequest{Amount: "1", Currency: "0xC", ExternalID: "cs_<&>", Recipient: "0xR",
		MethodDetails: MPPMethodDetails{ChainID: 8453, CredentialTypes: []string{"authorization"}, Decimals: 6}})
	require.NoError(t, err)
	require.Equal(t, `{"amount":"1","currency":"0xC","externalId":"cs_<&>","methodDetails":{"chainId":8453,"credentialTypes":["authorization"],"decimals":6},"recipient":"0xR"}`, string(raw))
}

func encodeCredential(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return "Payment " + base64.RawURLEncoding.EncodeToString(raw)
}

// TestDecodeMPPCredential: an Authorization: Payment header decodes to
// its credential, or is refused as malformed-credential.
func TestDecodeMPPCredential(t *testing.T) {
	good := MPPCredential{
		Challenge: MPPChallenge{ID: "id1", Realm: "r", Method: "evm", Intent: "charge", Request: "e30", Expires: "2026-01-15T12:05:00Z"},
		Payload:   MPPAuthorization{Type: "authorization", From: "0x1", To: "0x2", Value: "1", ValidAfter: "0", ValidBefore: "9", Nonce: "0x3", Signature: "0x4"},
		Source:    "did:pkh:eip155:1:0x1",
	}
	header := encodeCredential(t, good)
	token := strings.TrimPrefix(header, "Payment ")
	for _, tc := range []struct {
		name, header, refusal string
	}{
		{"good", header, ""},
		{"scheme in lower case", "payment " + token, ""},
		{"padded", header + strings.Repeat("=", (4-len(token)%4)%4), ""},
		{"another scheme", "Bearer " + token, `"Payment <base64url credential>"`},
		{"no token", "Payment", `"Payment <base64url credential>"`},
		{"standard base64", "Payment ab+/cd", "not base64url"},
		{"not json", "Payment " + base64.RawURLEncoding.EncodeToString([]byte("[1]")), "not the JSON"},
		{"no id", encodeCredential(t, map[string]any{"challenge": map[string]any{"realm": "r"}, "payload": good.Payload}), "challenge.id is required"},
		{"no payload type", encodeCredential(t, MPPCredential{Challenge: good.Challenge}), "payload.type is required"},
		{"too long", "Payment " + strings.Repeat("A", MPPCredentialMaxBytes), "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeMPPCredential(tc.header)
			if tc.refusal == "" {
				require.NoError(t, err)
				require.Equal(t, good, *got)
				return
			}
			var me *MPPError
			require.True(t, errors.As(err, &me), "%v", err)
			require.Equal(t, MPPMalformedCredential, me.Code)
			require.Contains(t, me.Detail, tc.refusal)
		})
	}
}

// FuzzMPPCredential: an Authorization header is decoded or refused as
// malformed-credential (nothing else, no panic), within
// MPPCredentialMaxBytes; what decodes has every field the checks read,
// and encodes back to the same credential.
func FuzzMPPCredential(f *testing.F) {
	f.Fuzz(func(t *testing.T, header string) {
		c, err := DecodeMPPCredential(header)
		if err != nil {
			var me *MPPError
			if !errors.As(err, &me) || me.Code != MPPMalformedCredential {
				t.Fatalf("refused with %v (%T), not malformed-credential", err, err)
			}
			return
		}
		if len(header) > MPPCredentialMaxBytes {
			t.Fatalf("decoded a %d-byte header", len(header))
		}
		ch := c.Challenge
		if ch.ID == "" || ch.Realm == "" || ch.Method == "" || ch.Intent == "" || ch.Request == "" || c.Payload.Type == "" {
			t.Fatalf("decoded a credential missing a required field: %+v", c)
		}
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("re-encoding: %v", err)
		}
		again := "Payment " + base64.RawURLEncoding.EncodeToString(raw)
		if len(again) > MPPCredentialMaxBytes {
			return
		}
		back, err := DecodeMPPCredential(again)
		if err != nil || !reflect.DeepEqual(c, back) {
			t.Fatalf("the credential %s does not decode back to itself: %v", raw, err)
		}
	})
}
