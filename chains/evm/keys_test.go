package evm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"
)

func TestNewKey(t *testing.T) {
	t.Parallel()

	key, addr, err := NewKey()
	require.NoError(t, err)
	require.Len(t, key, KeySize)
	require.True(t, common.IsHexAddress(addr))
	// EIP-55: the checksummed form is what we return.
	require.Equal(t, common.HexToAddress(addr).Hex(), addr)
}

func TestAddressOfInvalidKey(t *testing.T) {
	t.Parallel()

	n := curveN().FillBytes(make([]byte, 32))
	for name, key := range map[string][]byte{
		"empty": nil,
		"short": bytes.Repeat([]byte{0xab}, 31),
		"zero":  make([]byte, 32),
		"order": n,
	} {
		_, err := AddressOf(key)
		require.ErrorIs(t, err, ErrInvalidKey, name)
		if len(key) > 0 {
			require.NotContains(t, err.Error(), hex.EncodeToString(key), name)
		}
	}
}

// decodeXprv returns the private key and chain code of a BIP-32 serialized
// extended private key, checking its base58 checksum.
func decodeXprv(t *testing.T, s string) (key, chainCode []byte) {
	t.Helper()
	const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
	n := new(big.Int)
	for _, c := range s {
		i := strings.IndexRune(alphabet, c)
		require.GreaterOrEqual(t, i, 0)
		n.Mul(n, big.NewInt(58))
		n.Add(n, big.NewInt(int64(i)))
	}
	raw := n.FillBytes(make([]byte, 82)) // 78 bytes payload + 4 checksum
	payload, sum := raw[:78], raw[78:]
	h1 := sha256.Sum256(payload)
	h2 := sha256.Sum256(h1[:])
	require.Equal(t, h2[:4], sum, "checksum of %s", s)
	require.Equal(t, []byte{0x04, 0x88, 0xad, 0xe4}, payload[:4], "xprv version")
	require.Equal(t, byte(0), payload[45], "private key marker")
	return payload[46:78], payload[13:45]
}

// TestDeriveBIP32Vector1 checks CKDpriv against BIP-32 test vector 1,
// decoding the extended private keys published in the BIP.
func TestDeriveBIP32Vector1(t *testing.T) {
	t.Parallel()

	seed, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	h := hardened
	vectors := []struct {
		path []uint32
		xprv string
	}{
		{nil, "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"},
		{[]uint32{0 | h}, "xprv9uHRZZhk6KAJC1avXpDAp4MDc3sQKNxDiPvvkX8Br5ngLNv1TxvUxt4cV1rGL5hj6KCesnDYUhd7oWgT11eZG7XnxHrnYeSvkzY7d2bhkJ7"},
		{[]uint32{0 | h, 1}, "xprv9wTYmMFdV23N2TdNG573QoEsfRrWKQgWeibmLntzniatZvR9BmLnvSxqu53Kw1UmYPxLgboyZQaXwTCg8MSY3H2EU4pWcQDnRnrVA1xe8fs"},
		{[]uint32{0 | h, 1, 2 | h}, "xprv9z4pot5VBttmtdRTWfWQmoH1taj2axGVzFqSb8C9xaxKymcFzXBDptWmT7FwuEzG3ryjH4ktypQSAewRiNMjANTtpgP4mLTj34bhnZX7UiM"},
		{[]uint32{0 | h, 1, 2 | h, 2}, "xprvA2JDeKCSNNZky6uBCviVfJSKyQ1mDYahRjijr5idH2WwLsEd4Hsb2Tyh8RfQMuPh7f7RtyzTtdrbdqqsunu5Mm3wDvUAKRHSC34sJ7in334"},
		{[]uint32{0 | h, 1, 2 | h, 2, 1000000000}, "xprvA41z7zogVVwxVSgdKUHDy1SKmdb533PjDz7J6N6mV6uS3ze1ai8FHa8kmHScGpWmj4WggLyQjgPie1rFSruoUihUZREPSL39UNdE3BBDu76"},
	}
	for _, v := range vectors {
		wantKey, wantChain := decodeXprv(t, v.xprv)
		got, err := derivePath(seed, v.path)
		require.NoError(t, err)
		require.Equal(t, hex.EncodeToString(wantKey), hex.EncodeToString(got.key), "key at %v", v.path)
		require.Equal(t, hex.EncodeToString(wantChain), hex.EncodeToString(got.chainCode), "chain code at %v", v.path)
	}

	// Spot-check the decoder itself against the hex the BIP lists for m.
	key, chain := decodeXprv(t, vectors[0].xprv)
	require.Equal(t, "e8f32e723decf4051aefac8e2c93c9c5b214313817cdb01a1494b917c8436b35", hex.EncodeToString(key))
	require.Equal(t, "873dff81c02f525623fd1fe5167eac3a55a049de3d314bb42ee227ffed37d508", hex.EncodeToString(chain))
}

// abandonSeed is the BIP-39 seed of "abandon abandon ... about" with an
// empty passphrase; its first Ethereum account is widely published.
const abandonSeed = "5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc19a5ac40b389cd370d086206dec8aa6c43daea6690f20ad3d8d48b2d2ce9e38e4"

func TestDeriveKeyBIP44Ethereum(t *testing.T) {
	t.Parallel()

	seed, _ := hex.DecodeString(abandonSeed)
	key, addr, err := DeriveKey(seed, 0)
	require.NoError(t, err)
	require.Equal(t, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94", addr)

	// Re-deriving gives the same key, and the key controls the address.
	again, addrAgain, err := DeriveKey(seed, 0)
	require.NoError(t, err)
	require.Equal(t, key, again)
	require.Equal(t, addr, addrAgain)
	fromKey, err := AddressOf(key)
	require.NoError(t, err)
	require.Equal(t, addr, fromKey)

	// Other indexes give other addresses.
	_, addr1, err := DeriveKey(seed, 1)
	require.NoError(t, err)
	require.NotEqual(t, addr, addr1)
	_, addrMax, err := DeriveKey(seed, hardened-1)
	require.NoError(t, err)
	require.NotEqual(t, addr, addrMax)
}

func TestDeriveKeyRejects(t *testing.T) {
	t.Parallel()

	seed, _ := hex.DecodeString(abandonSeed)
	_, _, err := DeriveKey(seed, hardened)
	require.ErrorIs(t, err, ErrInvalidIndex)

	for _, bad := range [][]byte{nil, make([]byte, 15), make([]byte, 65)} {
		_, _, err := DeriveKey(bad, 0)
		require.ErrorIs(t, err, ErrInvalidSeed)
	}
}
