package agentpay

import (
	"crypto/sha256"
	"crypto/subtle"
)

// The admin API (docs/security.md#admin-key): operators' queries (the
// books) answer only a caller presenting the admin key, ADMIN_KEY, which
// cmd reads and hashes; the service holds only its SHA-256
// (Config.AdminKeyHash), compares in constant time, and without one the
// admin API is off: every admin query is refused as unauthenticated. The
// key is one shared secret, not an account: it grants the admin queries
// and nothing else (no agent's, merchant's or human's field; the books
// name the addresses that differ, with their owner's id, and their
// balances).

// AdminKeyHash is the SHA-256 of an admin key, what Config.AdminKeyHash
// holds.
func AdminKeyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// AuthenticateAdmin checks key against the configured admin key:
// ErrUnauthorized when it is not the key, or when no admin key is
// configured (the admin API is off).
func (s *Service) AuthenticateAdmin(key string) error {
	if len(s.cfg.AdminKeyHash) != sha256.Size || key == "" {
		return ErrUnauthorized
	}
	if subtle.ConstantTimeCompare(AdminKeyHash(key), s.cfg.AdminKeyHash) != 1 {
		return ErrUnauthorized
	}
	return nil
}
