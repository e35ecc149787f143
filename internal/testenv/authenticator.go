package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/stretchr/testify/require"
)

// Authenticator is a software WebAuthn authenticator for the tests that
// cannot drive a browser's (the app's browser test uses Chromium's virtual
// authenticator): it answers the options a relying party hands out as a
// browser would, with P-256 passkeys it keeps, so the service's checks run
// on real signatures. It answers for Origin only; a test changes the
// fields it answers with (a passkey's SignCount, Origin) to make a bad
// answer.
type Authenticator struct {
	// Origin is the page's origin the answers claim (clientDataJSON).
	Origin string
	// Passkeys are the passkeys made, oldest first.
	Passkeys []*SoftPasskey
	// NoUserVerification answers without the user-verified flag.
	NoUserVerification bool
}

// SoftPasskey is an Authenticator's passkey.
type SoftPasskey struct {
	ID         []byte
	UserHandle []byte
	RPID       string
	Key        *ecdsa.PrivateKey
	// SignCount is the counter the next assertion reports (then raised by
	// one); 0 stays 0, as synced passkeys report.
	SignCount uint32
}

// NewAuthenticator is an authenticator answering for a page of origin.
func NewAuthenticator(origin string) *Authenticator {
	return &Authenticator{Origin: origin}
}

var b64 = base64.RawURLEncoding

// creationOptions are what Register reads of navigator.credentials.create's
// options.
type creationOptions struct {
	PublicKey struct {
		Challenge string `json:"challenge"`
		RP        struct {
			ID string `json:"id"`
		} `json:"rp"`
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	} `json:"publicKey"`
}

// Register answers registration options ({"publicKey": ...} as JSON) with
// a new passkey, as PublicKeyCredential JSON; signCount is its counter
// at registration.
func (a *Authenticator) Register(tb testing.TB, options []byte, signCount uint32) []byte {
	tb.Helper()
	var opts creationOptions
	require.NoError(tb, json.Unmarshal(options, &opts))
	handle, err := b64.DecodeString(opts.PublicKey.User.ID)
	require.NoError(tb, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	pk := &SoftPasskey{ID: make([]byte, 32), UserHandle: handle, RPID: opts.PublicKey.RP.ID, Key: key, SignCount: signCount}
	_, _ = rand.Read(pk.ID)

	ecdh, err := key.PublicKey.ECDH()
	require.NoError(tb, err)
	point := ecdh.Bytes() // 0x04 || x || y
	cose, err := webauthncbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: point[1:33], -3: point[33:]})
	require.NoError(tb, err)
	authData := a.authData(pk.RPID, 0x40, pk.SignCount) // AT: attested credential data follows
	authData = append(authData, make([]byte, 16)...)    // AAGUID: none
	authData = binary.BigEndian.AppendUint16(authData, uint16(len(pk.ID)))
	authData = append(authData, pk.ID...)
	authData = append(authData, cose...)
	att, err := webauthncbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": authData})
	require.NoError(tb, err)
	out, err := json.Marshal(map[string]any{
		"id": b64.EncodeToString(pk.ID), "rawId": b64.EncodeToString(pk.ID), "type": "public-key",
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{},
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(a.clientData(tb, "webauthn.create", opts.PublicKey.Challenge)),
			"attestationObject": b64.EncodeToString(att),
			"transports":        []string{"internal"},
		},
	})
	require.NoError(tb, err)
	a.Passkeys = append(a.Passkeys, pk)
	return out
}

// Assert answers sign-in options ({"publicKey": ...} as JSON) with pk, as
// PublicKeyCredential JSON, and raises its counter (unless 0).
func (a *Authenticator) Assert(tb testing.TB, options []byte, pk *SoftPasskey) []byte {
	tb.Helper()
	var opts struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
		} `json:"publicKey"`
	}
	require.NoError(tb, json.Unmarshal(options, &opts))
	if pk.SignCount != 0 {
		pk.SignCount++
	}
	authData := a.authData(pk.RPID, 0, pk.SignCount)
	clientData := a.clientData(tb, "webauthn.get", opts.PublicKey.Challenge)
	cdHash := sha256.Sum256(clientData)
	digest := sha256.Sum256(append(append([]byte{}, authData...), cdHash[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, pk.Key, digest[:])
	require.NoError(tb, err)
	out, err := json.Marshal(map[string]any{
		"id": b64.EncodeToString(pk.ID), "rawId": b64.EncodeToString(pk.ID), "type": "public-key",
		"authenticatorAttachment": "platform", "clientExtensionResults": map[string]any{},
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(clientData),
			"authenticatorData": b64.EncodeToString(authData),
			"signature":         b64.EncodeToString(sig),
			"userHandle":        b64.EncodeToString(pk.UserHandle),
		},
	})
	require.NoError(tb, err)
	return out
}

// authData is the authenticator data's fixed part: the RP id's hash, the
// flags (user present, verified unless NoUserVerification, and extra) and
// the counter.
func (a *Authenticator) authData(rpID string, extra byte, count uint32) []byte {
	rpHash := sha256.Sum256([]byte(rpID))
	flags := 0x01 | extra // UP
	if !a.NoUserVerification {
		flags |= 0x04 // UV
	}
	out := append(rpHash[:], flags)
	return binary.BigEndian.AppendUint32(out, count)
}

func (a *Authenticator) clientData(tb testing.TB, typ, challenge string) []byte {
	tb.Helper()
	out, err := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": a.Origin, "crossOrigin": false})
	require.NoError(tb, err)
	return out
}
