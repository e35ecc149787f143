package evm

// Fuzz targets of what the EVM adapter reads from clients: addresses,
// EIP-712 signatures and the typed data they sign, and the payment URIs it
// builds. Seeds are in testdata/fuzz/<target>; `make fuzz` runs each
// target (docs/testing.md).

import (
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"

	"agentpay/chains"
)

// FuzzParseAddress: an accepted address is 0x and 40 hex digits, not
// zero, all one case or correctly checksummed, and parses to the address
// its digits spell.
func FuzzParseAddress(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Wallets{}.ParseAddress(s)
		if err != nil {
			return
		}
		body := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
		raw, herr := hex.DecodeString(body)
		switch {
		case len(s) != 42 || herr != nil:
			t.Fatalf("accepted %q", s)
		case common.BytesToAddress(raw) == common.Address{}:
			t.Fatalf("accepted the zero address %q", s)
		case got != common.BytesToAddress(raw).Hex():
			t.Fatalf("%q parsed as %s", s, got)
		case body != strings.ToLower(body) && body != strings.ToUpper(body) && body != got[2:]:
			t.Fatalf("accepted %q, mixed case with a wrong checksum", s)
		}
	})
}

// FuzzParseSignature: an accepted signature is 65 bytes of hex, v 0/1
// after normalising 27/28, s in the lower half of the curve order, and
// reads back the same from its own hex.
func FuzzParseSignature(f *testing.F) {
	halfN := new(big.Int).Rsh(crypto.S256().Params().N, 1)
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := Wallets{}.ParseSignature(s)
		if err != nil {
			return
		}
		switch {
		case len(sig) != 65:
			t.Fatalf("%q parsed to %d bytes", s, len(sig))
		case sig[64] > 1:
			t.Fatalf("%q parsed with v %d", s, sig[64])
		case new(big.Int).SetBytes(sig[32:64]).Cmp(halfN) > 0:
			t.Fatalf("accepted %q with a high s", s)
		case new(big.Int).SetBytes(sig[:32]).Sign() == 0:
			t.Fatalf("accepted %q with r zero", s)
		}
		again, err := Wallets{}.ParseSignature(hex.EncodeToString(sig))
		if err != nil || string(again) != string(sig) {
			t.Fatalf("%q parsed to %x, which reads back as %x (%v)", s, sig, again, err)
		}
	})
}

// FuzzTypedData: the typed data the service hands out to sign
// (SigningPayload), read as a wallet reads it, hashes to the digest Verify
// checks signatures against; a signature over it verifies for its signer
// only. The domain is the service's (agentpay, 1, Base or Base Sepolia);
// the username and wallet are the client's (validated before, but the
// hashing must hold for any string), the nonce any string.
func FuzzTypedData(f *testing.F) {
	key, err := crypto.HexToECDSA("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
	if err != nil {
		f.Fatal(err)
	}
	signer := crypto.PubkeyToAddress(key.PublicKey)
	f.Fuzz(func(t *testing.T, live bool, username, nonce string, wallet []byte) {
		chainID := int64(84532)
		if live {
			chainID = 8453
		}
		m := chains.TypedMessage{
			Domain: chains.MessageDomain{Name: "agentpay", Version: "1", ChainID: chainID},
			Type:   "AgentRegistration",
			Fields: []chains.MessageField{
				{Name: "username", Type: "string", Value: username},
				{Name: "wallet", Type: "address", Value: common.BytesToAddress(wallet).Hex()},
				{Name: "nonce", Type: "string", Value: nonce},
			},
		}
		payload, err := Wallets{}.SigningPayload(m)
		if err != nil {
			// Only a string JSON cannot carry is refused, and Verify
			// refuses the same message.
			if utf8.ValidString(username) && utf8.ValidString(nonce) {
				t.Fatalf("signing payload: %v", err)
			}
			if _, verr := (Wallets{}).Verify(m, make([]byte, 65), signer.Hex()); verr == nil {
				t.Fatal("Verify hashes a message SigningPayload refuses")
			}
			return
		}
		var td apitypes.TypedData
		if err := json.Unmarshal(payload, &td); err != nil {
			t.Fatalf("the payload %s is not typed data: %v", payload, err)
		}
		served, _, err := apitypes.TypedDataAndHash(td)
		if err != nil {
			t.Fatalf("a wallet cannot hash %s: %v", payload, err)
		}
		verified, _, err := apitypes.TypedDataAndHash(typedData(m))
		if err != nil {
			t.Fatal(err)
		}
		if string(served) != string(verified) {
			t.Fatalf("the served payload hashes to %x, Verify checks %x", served, verified)
		}
		sig, err := crypto.Sign(served, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, who := range []common.Address{signer, common.BytesToAddress(wallet)} {
			ok, err := Wallets{}.Verify(m, sig, who.Hex())
			if err != nil || ok != (who == signer) {
				t.Fatalf("Verify for %s = %v, %v", who, ok, err)
			}
		}
	})
}

// FuzzPaymentURI: the EIP-681 URI of a deposit names the token, the chain,
// the recipient and the exact amount in base units, each once, whatever
// the amount.
func FuzzPaymentURI(f *testing.F) {
	f.Fuzz(func(t *testing.T, token, to []byte, chainID uint64, amount []byte) {
		r := chains.PaymentRequest{
			ChainID: chainID, Token: common.BytesToAddress(token).Hex(), To: common.BytesToAddress(to).Hex(),
			Amount: new(big.Int).SetBytes(amount), Decimals: 6,
		}
		uri := Wallets{}.PaymentURI(r)
		rest, ok := strings.CutPrefix(uri, "ethereum:"+r.Token+"@")
		if !ok {
			t.Fatalf("%s does not start with the token", uri)
		}
		chain, query, ok := strings.Cut(rest, "/transfer?")
		if !ok || chain != new(big.Int).SetUint64(chainID).String() {
			t.Fatalf("%s: chain %q", uri, chain)
		}
		q, err := url.ParseQuery(query)
		if err != nil || len(q) != 2 || len(q["address"]) != 1 || len(q["uint256"]) != 1 {
			t.Fatalf("%s: query %v (%v)", uri, q, err)
		}
		if q.Get("address") != r.To || q.Get("uint256") != r.Amount.String() {
			t.Fatalf("%s: address %s amount %s", uri, q.Get("address"), q.Get("uint256"))
		}
	})
}

// fuzzPayerKey signs FuzzAuthorizationSignature's authorizations: a fixed
// key, so seeds hold.
const fuzzPayerKey = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"

// FuzzAuthorizationSignature: the relay's reading of an EIP-3009
// authorization before any chain call (parseAuthorization, then signer
// under the token's domain). Fields are what the fuzzer gives (amounts as
// big-endian bytes, which may exceed a uint256); the authorization is
// accepted exactly when its recipient is an address other than zero, its
// value above 0 and every amount a uint256, and its signature 65 bytes,
// else refused as malformed. When the target signs it with the payer's
// key, the signer recovered is the payer whatever the field values, and
// with v flipped it is not; any signature recovered has v 27 or 28 and a
// low s, as the token requires.
func FuzzAuthorizationSignature(f *testing.F) {
	key, err := crypto.HexToECDSA(fuzzPayerKey)
	if err != nil {
		f.Fatal(err)
	}
	payer := crypto.PubkeyToAddress(key.PublicKey)
	domain := eip712Domain("USDC", "2", big.NewInt(84532), common.HexToAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e"))
	limit := new(big.Int).Lsh(big.NewInt(1), 256)
	halfN := new(big.Int).Rsh(crypto.S256().Params().N, 1)
	f.Fuzz(func(t *testing.T, to, value, validAfter, validBefore, nonce, sig []byte, signIt bool) {
		a := chains.Authorization{
			From: payer.Hex(), To: common.BytesToAddress(to).Hex(),
			Value: new(big.Int).SetBytes(value), ValidAfter: new(big.Int).SetBytes(validAfter), ValidBefore: new(big.Int).SetBytes(validBefore),
			Signature: sig,
		}
		copy(a.Nonce[:], nonce)
		want := common.BytesToAddress(to) != (common.Address{}) && a.Value.Sign() > 0 &&
			a.Value.Cmp(limit) < 0 && a.ValidAfter.Cmp(limit) < 0 && a.ValidBefore.Cmp(limit) < 0
		signed := signIt && want
		if signed {
			d := authorization{From: payer, To: common.BytesToAddress(to), Value: a.Value, ValidAfter: a.ValidAfter,
				ValidBefore: a.ValidBefore, Nonce: a.Nonce}.digest(domain)
			if a.Signature, err = crypto.Sign(d[:], key); err != nil {
				t.Fatal(err)
			}
		}
		want = want && len(a.Signature) == 65
		p, err := parseAuthorization(a)
		if (err == nil) != want {
			t.Fatalf("%+v: accepted=%v, want %v (%v)", a, err == nil, want, err)
		}
		if err != nil {
			if r := chains.AuthorizationRefusal(err); r == nil || r.Reason != chains.AuthorizationMalformed {
				t.Fatalf("refused with %v, not as malformed", err)
			}
			return
		}
		got, ok := p.signer(domain)
		if ok && (p.v != 27 && p.v != 28 || new(big.Int).SetBytes(p.s[:]).Cmp(halfN) > 0) {
			t.Fatalf("recovered %s from v %d, s %x", got.Hex(), p.v, p.s)
		}
		if !signed {
			return
		}
		if !ok || got != payer {
			t.Fatalf("the payer's own signature recovered %s (%v)", got.Hex(), ok)
		}
		flipped := p
		flipped.v ^= 27 ^ 28
		if other, ok := flipped.signer(domain); ok && other == payer {
			t.Fatalf("the signature with v flipped still recovers the payer")
		}
	})
}
