package agentpay

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/internal/vault"
)

// MerchantKeys are the credentials of a merchant as issued: shown once,
// never again (only public keys and secret key hashes are stored; the
// webhook secret is sealed). WebhookSecret is empty when keys are rolled.
type MerchantKeys struct {
	LivePublicKey, LiveSecretKey string
	TestPublicKey, TestSecretKey string
	WebhookSecret                string
}

// MerchantKeysWarning tells the merchant the secrets are shown once, and
// MerchantKeysRolledWarning, after a roll, what the roll changed.
const (
	MerchantKeysWarning       = "Store these keys now: secret keys and the webhook secret are shown only once and cannot be retrieved later. Keep secret keys on your server; public keys may be used in the browser."
	MerchantKeysRolledWarning = MerchantKeysWarning + " The previous keys no longer work; the webhook secret is unchanged."
)

// newWebhookSecret issues the webhook signing secret of merchant id
// (whsec_...) and seals it with the vault, the merchant's id as associated
// data: every delivery signs with it, so it is kept, but a sealed secret
// copied to another merchant's row does not open.
func (s *Service) newWebhookSecret(id uuid.UUID) (plain string, sealed []byte, err error) {
	plain, _, err = vault.NewSecret(vault.PrefixWebhookSecret)
	if err != nil {
		return "", nil, err
	}
	if sealed, err = s.cfg.Vault.Seal([]byte(plain), id[:]); err != nil {
		return "", nil, fmt.Errorf("sealing webhook secret: %w", err)
	}
	return plain, sealed, nil
}

// openWebhookSecret opens the webhook secret newWebhookSecret sealed for
// merchantID.
func (s *Service) openWebhookSecret(merchantID uuid.UUID, sealed []byte) (string, error) {
	b, err := s.cfg.Vault.Open(sealed, merchantID[:])
	if err != nil {
		return "", fmt.Errorf("agentpay: opening the webhook secret of merchant %s: %w", merchantID, err)
	}
	return string(b), nil
}

// newKeyPair issues a public/secret key pair of a mode.
func newKeyPair(mode Mode) (public, secret string, secretHash []byte, err error) {
	pp, sp := vault.PrefixPublicLive, vault.PrefixSecretLive
	if mode == ModeTest {
		pp, sp = vault.PrefixPublicTest, vault.PrefixSecretTest
	}
	if public, _, err = vault.NewSecret(pp); err != nil {
		return "", "", nil, err
	}
	if secret, secretHash, err = vault.NewSecret(sp); err != nil {
		return "", "", nil, err
	}
	return public, secret, secretHash, nil
}

// insertKeyPairs issues and stores a live and a test key pair for merchant
// id inside tx, filling keys with the plain values.
func insertKeyPairs(ctx context.Context, tx *ent.Tx, id uuid.UUID, keys *MerchantKeys) error {
	for _, mode := range []Mode{ModeLive, ModeTest} {
		pub, sec, hash, err := newKeyPair(mode)
		if err != nil {
			return err
		}
		if err := tx.MerchantKey.Create().
			SetMerchantID(id).
			SetKind(merchantkey.Kind(mode)).
			SetPublicKey(pub).
			SetSecretKeyHash(hash).
			Exec(ctx); err != nil {
			return fmt.Errorf("storing %s key pair: %w", mode, err)
		}
		if mode == ModeLive {
			keys.LivePublicKey, keys.LiveSecretKey = pub, sec
		} else {
			keys.TestPublicKey, keys.TestSecretKey = pub, sec
		}
	}
	return nil
}

// RollMerchantKeys replaces both key pairs of the merchant (live and test)
// and returns the new ones, shown this once; the webhook secret is kept.
// The old keys are revoked in the same transaction, and the answer waits
// until no instance's authentication cache can still hold them, so by then
// every instance refuses them. Only the key the caller authenticated with
// can roll: of two concurrent rolls with one key, the second is
// ErrUnauthorized.
func (s *Service) RollMerchantKeys(ctx context.Context, auth *MerchantAuth) (*MerchantKeys, error) {
	if auth.keyMatch == nil {
		return nil, ErrUnauthorized // not from AuthenticateMerchant
	}
	keys := &MerchantKeys{}
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		now := s.now().UTC()
		n, err := tx.MerchantKey.Update().
			Where(merchantkey.MerchantID(auth.Merchant.ID), auth.keyMatch).
			SetRevokedAt(now).
			Save(ctx)
		if err != nil {
			return fmt.Errorf("revoking keys: %w", err)
		}
		if n == 0 {
			return ErrUnauthorized
		}
		if _, err := tx.MerchantKey.Update().
			Where(merchantkey.MerchantID(auth.Merchant.ID), merchantkey.RevokedAtIsNil()).
			SetRevokedAt(now).
			Save(ctx); err != nil {
			return fmt.Errorf("revoking keys: %w", err)
		}
		active, err := tx.Merchant.Query().Where(merchant.ID(auth.Merchant.ID), merchant.Active(true)).Exist(ctx)
		if err != nil {
			return err
		}
		if !active {
			return errMerchantDeactivated
		}
		return insertKeyPairs(ctx, tx, auth.Merchant.ID, keys)
	})
	if err != nil {
		return nil, err
	}
	// As a regenerated agent key: other instances' cached entries of the
	// old keys have expired before the caller learns the new ones.
	s.merchantAuth.WaitTTL(ctx)
	return keys, nil
}

// CurrentMerchantKeys is the merchant's key pairs in use (one live, one
// test; rolled keys are left out). Secret keys are never stored.
func (s *Service) CurrentMerchantKeys(ctx context.Context, m *ent.Merchant) ([]*ent.MerchantKey, error) {
	keys, err := s.cfg.DB.Ent.MerchantKey.Query().
		Where(merchantkey.MerchantID(m.ID), merchantkey.RevokedAtIsNil()).
		Order(merchantkey.ByKind()).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant keys: %w", err)
	}
	return keys, nil
}
