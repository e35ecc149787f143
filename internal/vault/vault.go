package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MasterKeySize is the length of MASTER_KEY once decoded.
const MasterKeySize = 32

// version1 prefixes every ciphertext sealed with AES-256-GCM under the
// key derived from the master key. The prefix lets a later version (a new
// master key, another cipher) coexist with rows sealed under this one, so keys
// can be rotated by re-sealing rows lazily instead of all at once.
const version1 byte = 1

const (
	nonceSize = 12
	// HKDF info strings separate the uses of the master key: the sealing key
	// and the deposit and treasury seeds are independent even though all come
	// from MASTER_KEY, so one secret is enough to run the service.
	sealInfo         = "agentpay vault aes-256-gcm v1"
	depositSeedInfo  = "agentpay deposit seed v1"
	treasurySeedInfo = "agentpay treasury seed v1"
	challengeKeyInfo = "agentpay payment challenge key v1"
	seedBytes        = 64
)

var (
	// ErrOpen is returned by Open for any ciphertext that does not
	// authenticate: another master key, tampered bytes or the wrong associated
	// data. The causes are deliberately not told apart.
	ErrOpen = errors.New("vault: cannot open ciphertext (wrong master key, tampered data or wrong row)")
	// ErrVersion is returned by Open for a ciphertext sealed by a version
	// of the vault this build does not know.
	ErrVersion = errors.New("vault: unknown ciphertext version")
)

// Vault seals the secrets the service keeps at rest and derives the seeds of
// deposit addresses and of the treasury, all from one master key (see the
// package documentation). A Vault never prints its keys: it formats as a
// fixed redacted string with every fmt verb.
type Vault struct {
	aead         cipher.AEAD
	depositSeed  []byte
	treasurySeed []byte
	challengeKey []byte
}

// New builds a vault from a 32-byte master key (see ParseMasterKey). The
// vault keeps no reference to masterKey.
func New(masterKey []byte) (*Vault, error) {
	if len(masterKey) != MasterKeySize {
		return nil, fmt.Errorf("vault: master key must be %d bytes, got %d", MasterKeySize, len(masterKey))
	}
	sealKey, err := hkdf.Key(sha256.New, masterKey, nil, sealInfo, 32)
	if err != nil {
		return nil, errors.New("vault: cannot derive sealing key")
	}
	block, err := aes.NewCipher(sealKey)
	if err != nil {
		return nil, errors.New("vault: cannot create cipher")
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, errors.New("vault: cannot create AES-GCM")
	}
	seed, err := hkdf.Key(sha256.New, masterKey, nil, depositSeedInfo, seedBytes)
	if err != nil {
		return nil, errors.New("vault: cannot derive deposit seed")
	}
	treasurySeed, err := hkdf.Key(sha256.New, masterKey, nil, treasurySeedInfo, seedBytes)
	if err != nil {
		return nil, errors.New("vault: cannot derive treasury seed")
	}
	challengeKey, err := hkdf.Key(sha256.New, masterKey, nil, challengeKeyInfo, 32)
	if err != nil {
		return nil, errors.New("vault: cannot derive challenge key")
	}
	return &Vault{aead: aead, depositSeed: seed, treasurySeed: treasurySeed, challengeKey: challengeKey}, nil
}

// Seal encrypts plaintext with a fresh random nonce. associatedData is not
// stored but must be given again to Open: pass the identity of the row the
// ciphertext belongs to (e.g. the wallet id) so a ciphertext copied into
// another row does not open there.
func (v *Vault) Seal(plaintext, associatedData []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plaintext)+v.aead.Overhead())
	out[0] = version1
	if _, err := rand.Read(out[1 : 1+nonceSize]); err != nil {
		return nil, fmt.Errorf("vault: reading random nonce: %w", err)
	}
	nonce := out[1 : 1+nonceSize]
	return v.aead.Seal(out, nonce, plaintext, versionedAD(version1, associatedData)), nil
}

// Open decrypts a ciphertext made by Seal with the same associated data.
func (v *Vault) Open(ciphertext, associatedData []byte) ([]byte, error) {
	if len(ciphertext) == 0 {
		return nil, ErrOpen
	}
	if ciphertext[0] != version1 {
		return nil, ErrVersion
	}
	if len(ciphertext) < 1+nonceSize+v.aead.Overhead() {
		return nil, ErrOpen
	}
	nonce := ciphertext[1 : 1+nonceSize]
	plain, err := v.aead.Open(nil, nonce, ciphertext[1+nonceSize:], versionedAD(version1, associatedData))
	if err != nil {
		// The GCM error says nothing useful and nothing secret; ours names the
		// likely causes for the operator.
		return nil, ErrOpen
	}
	return plain, nil
}

// versionedAD authenticates the version byte along with the caller's associated
// data, so a ciphertext cannot be relabelled as another version.
func versionedAD(version byte, associatedData []byte) []byte {
	ad := make([]byte, 0, 1+len(associatedData))
	ad = append(ad, version)
	return append(ad, associatedData...)
}

// DepositSeed returns the 64-byte seed from which checkout deposit addresses
// are derived (BIP-32 for EVM chains, SLIP-0010 for Solana). It is a function
// of the master key alone, so any address can be re-derived from its stored
// index after a restart. The caller gets a copy.
func (v *Vault) DepositSeed() []byte {
	return append([]byte(nil), v.depositSeed...)
}

// TreasurySeed returns the 64-byte seed from which the treasury keys are
// derived: a seed of its own, so no deposit index can reach the treasury.
// The caller gets a copy.
func (v *Vault) TreasurySeed() []byte {
	return append([]byte(nil), v.treasurySeed...)
}

// ChallengeKey returns the 32-byte HMAC key that binds the ids of the
// Payment challenges the service issues (MPP, mpp.go) to their
// parameters: derived from the master key, so every instance verifies a
// challenge any instance issued, with no row per challenge. The caller
// gets a copy.
func (v *Vault) ChallengeKey() []byte {
	return append([]byte(nil), v.challengeKey...)
}

// String redacts the vault so it is safe in logs.
func (v *Vault) String() string { return "vault.Vault{redacted}" }

// GoString redacts the vault for %#v.
func (v *Vault) GoString() string { return v.String() }

// Format redacts the vault for every fmt verb (%x and %+v included), since
// the cipher's round keys would otherwise be printed field by field.
func (v *Vault) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(v.String())) }

// ParseMasterKey decodes MASTER_KEY given as hex (64 digits) or base64
// (standard or URL alphabet, padded or not) of exactly 32 bytes. Surrounding
// whitespace is ignored. Errors never repeat the value.
func ParseMasterKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("master key is empty: expected 32 bytes as base64 or hex")
	}
	if len(s) == 2*MasterKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(b) != MasterKeySize {
			return nil, fmt.Errorf("master key decodes to %d bytes, need %d (base64 or hex)", len(b), MasterKeySize)
		}
		return b, nil
	}
	// Neither the value nor the decoder's error (which quotes an offending
	// byte) is included.
	return nil, fmt.Errorf("master key is not valid base64 or hex of %d bytes", MasterKeySize)
}

// GenerateMasterKey returns a new random 32-byte master key (for `dev`, or to
// print one for an operator to store).
func GenerateMasterKey() ([]byte, error) {
	k := make([]byte, MasterKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generating master key: %w", err)
	}
	return k, nil
}
