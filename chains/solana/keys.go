package solana

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/binary"
	"errors"

	solanago "github.com/gagliardetto/solana-go"
)

// Errors of key handling. They never carry key or seed bytes.
var (
	ErrInvalidKey   = errors.New("solana: invalid private key")
	ErrInvalidSeed  = errors.New("solana: seed must be 16 to 64 bytes")
	ErrInvalidIndex = errors.New("solana: derivation index must be below 2^31")
)

// KeySize is the length of a private key in the form Go's crypto/ed25519 and
// Solana wallets use: 32-byte seed followed by the 32-byte public key.
const KeySize = ed25519.PrivateKeySize

// hardened marks a SLIP-0010 hardened index; ed25519 has no other kind.
const hardened uint32 = 1 << 31

// NewKey generates a custodial key and returns it with its base58 address.
func NewKey() (key []byte, address string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", errors.New("solana: generating key failed")
	}
	return priv, solanago.PublicKeyFromBytes(pub).String(), nil
}

// AddressOf returns the base58 address of a 64-byte private key. The public
// half is recomputed from the seed half and must match, so a corrupted key
// is refused rather than yielding an address nobody can sign for.
func AddressOf(key []byte) (string, error) {
	if len(key) != KeySize {
		return "", ErrInvalidKey
	}
	want := ed25519.NewKeyFromSeed(key[:ed25519.SeedSize])
	if subtle.ConstantTimeCompare(want, key) != 1 {
		return "", ErrInvalidKey
	}
	return solanago.PublicKeyFromBytes(key[ed25519.SeedSize:]).String(), nil
}

// DeriveKey derives the deposit key at m/44'/501'/index'/0' from seed with
// SLIP-0010 for ed25519, the path Phantom and Solflare use for account index,
// so a deposit key can be imported into a standard wallet if ever needed.
// index must be below 2^31 (it is used hardened).
func DeriveKey(seed []byte, index uint32) (key []byte, address string, err error) {
	if index >= hardened {
		return nil, "", ErrInvalidIndex
	}
	k, err := derivePath(seed, []uint32{44 | hardened, 501 | hardened, index | hardened, 0 | hardened})
	if err != nil {
		return nil, "", err
	}
	priv := ed25519.NewKeyFromSeed(k.key)
	return priv, solanago.PublicKeyFromBytes(priv[ed25519.SeedSize:]).String(), nil
}

// extendedKey is a SLIP-0010 ed25519 node: the 32-byte ed25519 seed and its
// chain code.
type extendedKey struct {
	key       []byte
	chainCode []byte
}

// derivePath derives the node at path (all indexes hardened) from seed.
func derivePath(seed []byte, path []uint32) (extendedKey, error) {
	if len(seed) < 16 || len(seed) > 64 {
		return extendedKey{}, ErrInvalidSeed
	}
	mac := hmac.New(sha512.New, []byte("ed25519 seed"))
	mac.Write(seed)
	I := mac.Sum(nil)
	k := extendedKey{key: I[:32], chainCode: I[32:]}
	for _, i := range path {
		if i < hardened {
			// SLIP-0010 defines no public (normal) derivation for ed25519.
			return extendedKey{}, ErrInvalidIndex
		}
		k = deriveChild(k, i)
	}
	return k, nil
}

// deriveChild is SLIP-0010 private child derivation for ed25519. Unlike
// secp256k1 every 32-byte string is a valid ed25519 seed, so it cannot fail.
func deriveChild(parent extendedKey, i uint32) extendedKey {
	data := make([]byte, 0, 37)
	data = append(data, 0)
	data = append(data, parent.key...)
	data = binary.BigEndian.AppendUint32(data, i)
	mac := hmac.New(sha512.New, parent.chainCode)
	mac.Write(data)
	I := mac.Sum(nil)
	return extendedKey{key: I[:32], chainCode: I[32:]}
}
