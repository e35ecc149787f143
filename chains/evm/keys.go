package evm

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"math/big"

	"github.com/ethereum/go-ethereum/crypto"
)

// Errors of key handling. They never carry key or seed bytes.
var (
	ErrInvalidKey   = errors.New("evm: invalid private key")
	ErrInvalidSeed  = errors.New("evm: seed must be 16 to 64 bytes")
	ErrInvalidIndex = errors.New("evm: derivation index must be below 2^31")
	errDerivation   = errors.New("evm: key derivation failed")
)

// KeySize is the length of a private key: a big-endian secp256k1 scalar.
const KeySize = 32

// hardened marks a BIP-32 hardened index.
const hardened uint32 = 1 << 31

// NewKey generates a custodial key and returns it with its EIP-55 address.
func NewKey() (key []byte, address string, err error) {
	priv, err := crypto.GenerateKey()
	if err != nil {
		return nil, "", errors.New("evm: generating key failed")
	}
	return crypto.FromECDSA(priv), crypto.PubkeyToAddress(priv.PublicKey).Hex(), nil
}

// AddressOf returns the EIP-55 checksummed address of a private key.
func AddressOf(key []byte) (string, error) {
	// ToECDSA also rejects zero and out-of-range scalars; its errors are
	// replaced anyway so the message is ours.
	priv, err := crypto.ToECDSA(key)
	if err != nil {
		return "", ErrInvalidKey
	}
	return crypto.PubkeyToAddress(priv.PublicKey).Hex(), nil
}

// DeriveKey derives the deposit key at m/44'/60'/0'/0/index from seed with
// BIP-32, the path wallets such as MetaMask use for account index, so a
// deposit key can be imported into standard tooling if ever needed. index
// must be below 2^31 (the last level is not hardened).
//
// If a level yields an invalid child (probability below 2^-127), BIP-32 says
// to proceed with the next index; deriveChild does so.
func DeriveKey(seed []byte, index uint32) (key []byte, address string, err error) {
	if index >= hardened {
		return nil, "", ErrInvalidIndex
	}
	k, err := derivePath(seed, []uint32{44 | hardened, 60 | hardened, 0 | hardened, 0, index})
	if err != nil {
		return nil, "", err
	}
	address, err = AddressOf(k.key)
	if err != nil {
		return nil, "", errDerivation
	}
	return k.key, address, nil
}

// extendedKey is a BIP-32 extended private key.
type extendedKey struct {
	key       []byte // 32-byte scalar
	chainCode []byte // 32 bytes
}

// derivePath derives the extended private key at path from seed.
func derivePath(seed []byte, path []uint32) (extendedKey, error) {
	k, err := masterKey(seed)
	if err != nil {
		return extendedKey{}, err
	}
	for _, i := range path {
		if k, err = deriveChild(k, i); err != nil {
			return extendedKey{}, err
		}
	}
	return k, nil
}

// masterKey implements BIP-32 master key generation.
func masterKey(seed []byte) (extendedKey, error) {
	if len(seed) < 16 || len(seed) > 64 {
		return extendedKey{}, ErrInvalidSeed
	}
	mac := hmac.New(sha512.New, []byte("Bitcoin seed"))
	mac.Write(seed)
	I := mac.Sum(nil)
	il := new(big.Int).SetBytes(I[:32])
	if il.Sign() == 0 || il.Cmp(curveN()) >= 0 {
		// BIP-32: the master key is invalid; only another seed helps.
		return extendedKey{}, ErrInvalidSeed
	}
	return extendedKey{key: I[:32], chainCode: I[32:]}, nil
}

// deriveChild implements BIP-32 CKDpriv for index i. When the child at i is
// invalid it moves on to i+1, as BIP-32 prescribes, without crossing from the
// normal into the hardened range or past the last hardened index.
func deriveChild(parent extendedKey, i uint32) (extendedKey, error) {
	n := curveN()
	for {
		data := make([]byte, 0, 37)
		if i >= hardened {
			data = append(data, 0)
			data = append(data, parent.key...)
		} else {
			priv, err := crypto.ToECDSA(parent.key)
			if err != nil {
				return extendedKey{}, errDerivation
			}
			data = append(data, crypto.CompressPubkey(&priv.PublicKey)...)
		}
		data = binary.BigEndian.AppendUint32(data, i)

		mac := hmac.New(sha512.New, parent.chainCode)
		mac.Write(data)
		I := mac.Sum(nil)

		il := new(big.Int).SetBytes(I[:32])
		if il.Cmp(n) < 0 {
			child := il.Add(il, new(big.Int).SetBytes(parent.key))
			child.Mod(child, n)
			if child.Sign() != 0 {
				return extendedKey{key: child.FillBytes(make([]byte, KeySize)), chainCode: I[32:]}, nil
			}
		}
		next := i + 1
		if next == hardened || next == 0 {
			return extendedKey{}, errDerivation
		}
		i = next
	}
}

func curveN() *big.Int { return crypto.S256().Params().N }
