package vault

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func testVault(t *testing.T) (*Vault, []byte) {
	t.Helper()
	mk, err := GenerateMasterKey()
	require.NoError(t, err)
	v, err := New(mk)
	require.NoError(t, err)
	return v, mk
}

func TestVaultRoundTrip(t *testing.T) {
	t.Parallel()

	v, _ := testVault(t)
	for _, plain := range [][]byte{
		[]byte("wallet private key bytes, 32 or 64 of them............"),
		{},
	} {
		ct, err := v.Seal(plain, []byte("wallet:w_1"))
		require.NoError(t, err)
		require.Equal(t, version1, ct[0])
		require.Len(t, ct, 1+12+len(plain)+16)

		got, err := v.Open(ct, []byte("wallet:w_1"))
		require.NoError(t, err)
		require.Equal(t, string(plain), string(got))
	}
}

func TestVaultSameMasterKeyOpens(t *testing.T) {
	t.Parallel()

	// A restarted service builds a new Vault from the same MASTER_KEY and
	// must open what the previous one sealed.
	v1, mk := testVault(t)
	ct, err := v1.Seal([]byte("secret"), []byte("w_1"))
	require.NoError(t, err)

	v2, err := New(mk)
	require.NoError(t, err)
	got, err := v2.Open(ct, []byte("w_1"))
	require.NoError(t, err)
	require.Equal(t, []byte("secret"), got)
	require.Equal(t, v1.DepositSeed(), v2.DepositSeed())
}

func TestVaultStoredKeyNotReadable(t *testing.T) {
	t.Parallel()

	v, _ := testVault(t)
	walletKey := []byte("0123456789abcdef0123456789abcdef")
	ad := []byte("wallet:w_1")
	ct, err := v.Seal(walletKey, ad)
	require.NoError(t, err)
	require.NotContains(t, string(ct), string(walletKey))

	t.Run("AnotherMasterKey", func(t *testing.T) {
		other, _ := testVault(t)
		_, err := other.Open(ct, ad)
		require.ErrorIs(t, err, ErrOpen)
	})

	t.Run("Tampered", func(t *testing.T) {
		for i := 1; i < len(ct); i++ { // byte 0 is the version, covered below
			bad := append([]byte(nil), ct...)
			bad[i] ^= 0x01
			_, err := v.Open(bad, ad)
			require.ErrorIs(t, err, ErrOpen, "flipped byte %d", i)
		}
		_, err := v.Open(ct[:len(ct)-1], ad)
		require.ErrorIs(t, err, ErrOpen)
		_, err = v.Open(ct[:5], ad)
		require.ErrorIs(t, err, ErrOpen)
		_, err = v.Open(nil, ad)
		require.ErrorIs(t, err, ErrOpen)
	})

	t.Run("WrongAssociatedData", func(t *testing.T) {
		// A ciphertext copied into another wallet's row does not open there.
		_, err := v.Open(ct, []byte("wallet:w_2"))
		require.ErrorIs(t, err, ErrOpen)
		_, err = v.Open(ct, nil)
		require.ErrorIs(t, err, ErrOpen)
	})

	t.Run("UnknownVersion", func(t *testing.T) {
		bad := append([]byte(nil), ct...)
		bad[0] = 2
		_, err := v.Open(bad, ad)
		require.ErrorIs(t, err, ErrVersion)
	})
}

func TestVaultCiphertextsDiffer(t *testing.T) {
	t.Parallel()

	v, _ := testVault(t)
	a, err := v.Seal([]byte("same"), []byte("w"))
	require.NoError(t, err)
	b, err := v.Seal([]byte("same"), []byte("w"))
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.NotEqual(t, a[1:13], b[1:13], "nonces must differ")
}

func TestVaultDepositSeed(t *testing.T) {
	t.Parallel()

	// Pin the derivation: changing it would move every deposit address.
	mk := make([]byte, 32)
	for i := range mk {
		mk[i] = byte(i)
	}
	v, err := New(mk)
	require.NoError(t, err)
	seed := v.DepositSeed()
	// HKDF-SHA256(ikm=00..1f, no salt, info "agentpay deposit seed v1", 64),
	// computed independently of Go's crypto/hkdf.
	require.Equal(t, "42910d70a6ee410086857724e737d8f88869d20e2c9404905ec23eef102efafa"+
		"6b604f83757fa23a3d1e28b723fbd20b4f5b34274f3327599c7d8d060e01a800", hex.EncodeToString(seed))

	// Callers get a copy they cannot use to alter the vault.
	seed[0] ^= 0xff
	require.NotEqual(t, seed, v.DepositSeed())

	other, _ := testVault(t)
	require.NotEqual(t, v.DepositSeed(), other.DepositSeed())

	// The treasury has a seed of its own, so no deposit index can reach it;
	// pinned likewise (info "agentpay treasury seed v1"), since changing it
	// would move the treasury wallets.
	treasury := v.TreasurySeed()
	require.Equal(t, "cf87a75853a04fdcc4639446a291b47b59e31fa954fa3002620ac6f9c1a4421e"+
		"95a71da8e2b3b3307410ccb017e51ae3e331d3a8d9b6f29fa03fa1a608093efd", hex.EncodeToString(treasury))
	treasury[0] ^= 0xff
	require.NotEqual(t, treasury, v.TreasurySeed())

	// The challenge key binds issued MPP challenges (mpp.go): pinned
	// (info "agentpay payment challenge key v1"), since changing it would
	// void every challenge outstanding, and apart from both seeds.
	key := v.ChallengeKey()
	require.Equal(t, "fc5cc35fa024c1b2b10539f35f098708d45bee3133de56e2749e1fe3753c105b", hex.EncodeToString(key))
	key[0] ^= 0xff
	require.NotEqual(t, key, v.ChallengeKey())
}

func TestNewRejectsBadLength(t *testing.T) {
	t.Parallel()

	for _, n := range []int{0, 16, 31, 33, 64} {
		_, err := New(make([]byte, n))
		require.Error(t, err)
	}
}

func TestParseMasterKey(t *testing.T) {
	t.Parallel()

	mk, err := GenerateMasterKey()
	require.NoError(t, err)
	require.Len(t, mk, MasterKeySize)

	for name, s := range map[string]string{
		"hex":        hex.EncodeToString(mk),
		"HEX":        strings.ToUpper(hex.EncodeToString(mk)),
		"base64":     base64.StdEncoding.EncodeToString(mk),
		"base64raw":  base64.RawStdEncoding.EncodeToString(mk),
		"base64url":  base64.URLEncoding.EncodeToString(mk),
		"whitespace": "  " + base64.StdEncoding.EncodeToString(mk) + "\n",
	} {
		got, err := ParseMasterKey(s)
		require.NoError(t, err, name)
		require.Equal(t, mk, got, name)
	}
}

func TestParseMasterKeyErrorsDoNotEchoValue(t *testing.T) {
	t.Parallel()

	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	bad := []string{
		"",
		short,
		hex.EncodeToString([]byte("sixteen byte key")),
		"not-a-key!!not-a-key!!not-a-key!!not-a-key!!",
		"zz" + strings.Repeat("ab", 31), // hex-length but not hex
	}
	for _, s := range bad {
		_, err := ParseMasterKey(s)
		require.Error(t, err)
		if s != "" {
			require.NotContains(t, err.Error(), s)
			require.NotContains(t, err.Error(), s[:8])
		}
	}
}

func TestVaultErrorsAndFormattingHoldNoKeyMaterial(t *testing.T) {
	t.Parallel()

	v, mk := testVault(t)
	ct, err := v.Seal([]byte("wallet key"), []byte("w_1"))
	require.NoError(t, err)

	other, _ := testVault(t)
	_, openErr := other.Open(ct, []byte("w_1"))
	require.Error(t, openErr)

	secrets := []string{
		hex.EncodeToString(mk),
		base64.StdEncoding.EncodeToString(mk),
		hex.EncodeToString(v.DepositSeed()),
		hex.EncodeToString(v.TreasurySeed()),
		string(mk),
		"wallet key",
	}
	outputs := []string{
		fmt.Sprint(v), fmt.Sprintf("%v", v), fmt.Sprintf("%+v", v), fmt.Sprintf("%#v", v),
		fmt.Sprintf("%x", v), fmt.Sprintf("%s", v),
		fmt.Sprintf("%+v", struct{ V *Vault }{v}),
	}
	for _, out := range outputs {
		require.Contains(t, out, "redacted", out)
	}
	for _, out := range append(outputs, openErr.Error()) {
		for _, s := range secrets {
			require.NotContains(t, out, s)
		}
	}
}
