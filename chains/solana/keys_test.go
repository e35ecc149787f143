package solana

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"

	solanago "github.com/gagliardetto/solana-go"
	"github.com/stretchr/testify/require"
)

func TestNewKey(t *testing.T) {
	t.Parallel()

	key, addr, err := NewKey()
	require.NoError(t, err)
	require.Len(t, key, KeySize)
	pub, err := solanago.PublicKeyFromBase58(addr)
	require.NoError(t, err)
	require.Equal(t, []byte(key[32:]), pub.Bytes())

	// The key signs for the address.
	msg := []byte("agentpay")
	require.True(t, ed25519.Verify(pub.Bytes(), msg, ed25519.Sign(key, msg)))
}

func TestAddressOfInvalidKey(t *testing.T) {
	t.Parallel()

	key, _, err := NewKey()
	require.NoError(t, err)
	corrupt := append([]byte(nil), key...)
	corrupt[40] ^= 1 // public half no longer matches the seed half

	for name, k := range map[string][]byte{
		"empty":   nil,
		"seed":    key[:32],
		"corrupt": corrupt,
	} {
		_, err := AddressOf(k)
		require.ErrorIs(t, err, ErrInvalidKey, name)
		if len(k) > 0 {
			require.NotContains(t, err.Error(), hex.EncodeToString(k), name)
		}
	}
}

// TestDeriveSLIP10Vector1 checks derivation against SLIP-0010 test vector 1
// for ed25519. Public keys are listed there with a 0x00 prefix.
func TestDeriveSLIP10Vector1(t *testing.T) {
	t.Parallel()

	seed, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f")
	h := hardened
	vectors := []struct {
		path      []uint32
		chainCode string
		private   string
		public    string
	}{
		{nil,
			"90046a93de5380a72b5e45010748567d5ea02bbf6522f979e05c0d8d8ca9fffb",
			"2b4be7f19ee27bbf30c667b642d5f4aa69fd169872f8fc3059c08ebae2eb19e7",
			"00a4b2856bfec510abab89753fac1ac0e1112364e7d250545963f135f2a33188ed"},
		{[]uint32{0 | h},
			"8b59aa11380b624e81507a27fedda59fea6d0b779a778918a2fd3590e16e9c69",
			"68e0fe46dfb67e368c75379acec591dad19df3cde26e63b93a8e704f1dade7a3",
			"008c8a13df77a28f3445213a0f432fde644acaa215fc72dcdf300d5efaa85d350c"},
		{[]uint32{0 | h, 1 | h},
			"a320425f77d1b5c2505a6b1b27382b37368ee640e3557c315416801243552f14",
			"b1d0bad404bf35da785a64ca1ac54b2617211d2777696fbffaf208f746ae84f2",
			"001932a5270f335bed617d5b935c80aedb1a35bd9fc1e31acafd5372c30f5c1187"},
		{[]uint32{0 | h, 1 | h, 2 | h},
			"2e69929e00b5ab250f49c3fb1c12f252de4fed2c1db88387094a0f8c4c9ccd6c",
			"92a5b23c0b8a99e37d07df3fb9966917f5d06e02ddbd909c7e184371463e9fc9",
			"00ae98736566d30ed0e9d2f4486a64bc95740d89c7db33f52121f8ea8f76ff0fc1"},
		{[]uint32{0 | h, 1 | h, 2 | h, 2 | h},
			"8f6d87f93d750e0efccda017d662a1b31a266e4a6f5993b15f5c1f07f74dd5cc",
			"30d1dc7e5fc04c31219ab25a27ae00b50f6fd66622f6e9c913253d6511d1e662",
			"008abae2d66361c879b900d204ad2cc4984fa2aa344dd7ddc46007329ac76c429c"},
		{[]uint32{0 | h, 1 | h, 2 | h, 2 | h, 1000000000 | h},
			"68789923a0cac2cd5a29172a475fe9e0fb14cd6adb5ad98a3fa70333e7afa230",
			"8f94d394a8e8fd6b1bc2f3f49f5c47e385281d5c17e65324b0f62483e37e8793",
			"003c24da049451555d51a7014a37337aa4e12d41e485abccfa46b47dfb2af54b7a"},
	}
	for _, v := range vectors {
		got, err := derivePath(seed, v.path)
		require.NoError(t, err)
		require.Equal(t, v.chainCode, hex.EncodeToString(got.chainCode), "chain code at %v", v.path)
		require.Equal(t, v.private, hex.EncodeToString(got.key), "private key at %v", v.path)
		pub := ed25519.NewKeyFromSeed(got.key).Public().(ed25519.PublicKey)
		require.Equal(t, v.public, "00"+hex.EncodeToString(pub), "public key at %v", v.path)
	}
}

// abandonSeed is the BIP-39 seed of "abandon abandon ... about" with an
// empty passphrase; its first Phantom/Solflare account is widely published.
const abandonSeed = "5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc19a5ac40b389cd370d086206dec8aa6c43daea6690f20ad3d8d48b2d2ce9e38e4"

func TestDeriveKeyPhantomPath(t *testing.T) {
	t.Parallel()

	seed, _ := hex.DecodeString(abandonSeed)
	key, addr, err := DeriveKey(seed, 0)
	require.NoError(t, err)
	require.Len(t, key, KeySize)
	require.Equal(t, "HAgk14JpMQLgt6rVgv7cBQFJWFto5Dqxi472uT3DKpqk", addr)

	// Re-deriving gives the same key, and the key controls the address.
	again, addrAgain, err := DeriveKey(seed, 0)
	require.NoError(t, err)
	require.Equal(t, key, again)
	require.Equal(t, addr, addrAgain)
	fromKey, err := AddressOf(key)
	require.NoError(t, err)
	require.Equal(t, addr, fromKey)

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

	// ed25519 has no normal derivation.
	_, err = derivePath(seed, []uint32{44})
	require.ErrorIs(t, err, ErrInvalidIndex)
}
