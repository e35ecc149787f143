package agentpay

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// MerchantKeys are the credentials of a merchant as issued: shown once,
// never again (only public keys and secret key hashes are stored; webhook
// secrets are sealed). A roll fills in the rolled mode's pair only, and no
// webhook secret.
type MerchantKeys struct {
	LivePublicKey, LiveSecretKey string
	TestPublicKey, TestSecretKey string
	// WebhookSecret signs live-mode deliveries, TestWebhookSecret test-mode
	// ones.
	WebhookSecret, TestWebhookSecret string
}

// MerchantKeysWarning tells the merchant the secrets are shown once, and
// MerchantKeysRolledWarning, after a roll, what the roll changed.
const (
	MerchantKeysWarning       = "Store these keys now: secret keys and the webhook secrets are shown only once and cannot be retrieved later. Keep secret keys on your server; public keys may be used in the browser."
	MerchantKeysRolledWarning = "Store these keys now: the secret key is shown only once and cannot be retrieved later. The previous key pair of this mode no longer works; the other mode's keys and the webhook secrets are unchanged."
)

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

// insertKeyPair issues and stores a key pair of mode for merchant id inside
// tx, filling keys with the plain values.
func insertKeyPair(ctx context.Context, tx *ent.Tx, id uuid.UUID, mode Mode, keys *MerchantKeys) error {
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
	return nil
}

var errTestKeyRollsLive = fmt.Errorf("%w: a test key rolls test keys only; rolling live keys needs a live secret key", ErrForbidden)

// RollMerchantKeys replaces the key pair of one mode and returns the new
// pair, shown this once: mode "" is the caller's key's own. A test key
// rolls the test pair only (live mode is ErrForbidden: a test key never
// reaches live credentials); a live key rolls either, so a merchant who
// lost its test key can replace it. A dashboard session rolls as a key of
// its mode would. The other mode's pair and the webhook
// secrets are kept. The old pair is revoked in the same transaction, and
// the answer waits until no instance's authentication cache can still hold
// it, so by then every instance refuses it. The caller's key must still be
// current: of two concurrent rolls with one key, the second is
// ErrUnauthorized.
func (s *Service) RollMerchantKeys(ctx context.Context, auth *MerchantAuth, mode Mode) (*MerchantKeys, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	if auth.keyMatch == nil && auth.Dashboard == nil {
		return nil, ErrUnauthorized // from neither AuthenticateMerchant nor AuthenticateDashboard
	}
	switch mode {
	case "":
		mode = auth.Mode
	case ModeLive, ModeTest:
	default:
		return nil, Invalid("mode", "must be live or test")
	}
	if mode == ModeLive && auth.Mode != ModeLive {
		return nil, errTestKeyRollsLive
	}
	keys := &MerchantKeys{}
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		// The merchant's row lock serialises rolls (and deactivation).
		m, err := store.ForUpdate(s.cfg.DB, tx.Merchant.Query().Where(merchant.ID(auth.Merchant.ID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading merchant: %w", err)
		}
		if !m.Active {
			return errMerchantDeactivated
		}
		if auth.keyMatch != nil { // a dashboard session holds no key to check
			current, err := tx.MerchantKey.Query().Where(merchantkey.MerchantID(m.ID), auth.keyMatch).Exist(ctx)
			if err != nil {
				return fmt.Errorf("reading keys: %w", err)
			}
			if !current {
				return ErrUnauthorized
			}
		}
		if _, err := tx.MerchantKey.Update().
			Where(merchantkey.MerchantID(m.ID), merchantkey.KindEQ(merchantkey.Kind(mode)), merchantkey.RevokedAtIsNil()).
			SetRevokedAt(s.now().UTC()).
			Save(ctx); err != nil {
			return fmt.Errorf("revoking keys: %w", err)
		}
		return insertKeyPair(ctx, tx, m.ID, mode, keys)
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
