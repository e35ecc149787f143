package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/internal/store"
	"agentpay/webhook"
)

// Webhook endpoints: each mode of a merchant has its own webhook URL and
// its own signing secret. A test key reaches test-mode state only, so it
// sets the test URL and rolls the test secret; the live URL and secret
// change with a live key only. Were the secret shared, a test key could
// point test events at a receiver of its choosing and collect bodies signed
// with the secret the merchant's live receiver trusts.
//
// A secret is rolled with an overlap: the replaced secret keeps signing
// next to the new one (webhook-signature lists both) until the overlap
// ends, so the merchant can deploy the new secret without refusing a
// delivery meanwhile. An overlap of zero drops it at once (a leaked secret).

const (
	// DefaultWebhookSecretOverlap is how long a rolled secret keeps signing
	// when the roll does not say.
	DefaultWebhookSecretOverlap = 24 * time.Hour
	// MaxWebhookSecretOverlap bounds the overlap a roll may ask for.
	MaxWebhookSecretOverlap = 7 * 24 * time.Hour
)

// WebhookSecretRolledWarning tells the merchant, with a new secret, that it
// is shown once and what happens to the previous one.
const WebhookSecretRolledWarning = "Store this webhook secret now: it is shown only once. Until previous_secret_expires_at, deliveries are signed with the previous secret too (webhook-signature lists both; X-Checkout-Signature uses the new one only)."

// webhookEndpoint is one mode's webhook settings of a merchant, the secrets
// sealed.
type webhookEndpoint struct {
	url string
	// secret is nil for test mode of a merchant registered before modes
	// had their own secrets, until it rolls one.
	secret        []byte
	previous      []byte
	previousUntil *time.Time
}

// webhookEndpointOf is the webhook settings of mode.
func webhookEndpointOf(m *ent.Merchant, mode Mode) webhookEndpoint {
	if mode == ModeLive {
		return webhookEndpoint{m.WebhookURL, m.WebhookSecretEncrypted, m.WebhookSecretPreviousEncrypted, m.WebhookSecretPreviousExpiresAt}
	}
	return webhookEndpoint{m.TestWebhookURL, m.TestWebhookSecretEncrypted, m.TestWebhookSecretPreviousEncrypted, m.TestWebhookSecretPreviousExpiresAt}
}

// WebhookURLOf is where the merchant's events of mode are delivered; "" when
// nowhere (the events are recorded and shown in the log all the same).
func WebhookURLOf(m *ent.Merchant, mode Mode) string {
	return webhookEndpointOf(m, mode).url
}

// webhookSecretAD is what a mode's secret is sealed to: the merchant's id,
// and for test mode a suffix, so a sealed secret copied to another
// merchant's row, or to the other mode's column, does not open. (Live mode
// keeps the bare id that secrets sealed before test mode had its own use.)
func webhookSecretAD(merchantID uuid.UUID, mode Mode) []byte {
	if mode == ModeLive {
		return merchantID[:]
	}
	return append(append([]byte{}, merchantID[:]...), "/test"...)
}

// newWebhookSecret issues a webhook signing secret of mode for merchant id
// in the Standard Webhooks form (whsec_ + base64 of 32 random bytes) and
// seals it with the vault.
func (s *Service) newWebhookSecret(id uuid.UUID, mode Mode) (plain string, sealed []byte, err error) {
	if plain, err = webhook.NewSecret(); err != nil {
		return "", nil, fmt.Errorf("issuing webhook secret: %w", err)
	}
	if sealed, err = s.cfg.Vault.Seal([]byte(plain), webhookSecretAD(id, mode)); err != nil {
		return "", nil, fmt.Errorf("sealing webhook secret: %w", err)
	}
	return plain, sealed, nil
}

// openWebhookSecret opens a secret newWebhookSecret sealed for merchantID
// and mode.
func (s *Service) openWebhookSecret(merchantID uuid.UUID, mode Mode, sealed []byte) (string, error) {
	b, err := s.cfg.Vault.Open(sealed, webhookSecretAD(merchantID, mode))
	if err != nil {
		return "", fmt.Errorf("agentpay: opening the %s webhook secret of merchant %s: %w", mode, merchantID, err)
	}
	return string(b), nil
}

// errNoWebhookSecret: test mode of a merchant registered before modes had
// their own secrets has none until it rolls one. A delivery of it already
// pending then (made to the URL both modes shared) is not signed with the
// live secret: each try fails with this, recorded in the webhook log.
var errNoWebhookSecret = errors.New("not sent: test mode has no webhook secret yet; roll one with a test key (" + ActionRollWebhookSecret.Mark() + ")")

// signingSecrets are the secrets a delivery of mode made at `at` is signed
// with: the current one, then the previous one while its overlap lasts.
func (s *Service) signingSecrets(merchantID uuid.UUID, mode Mode, ep webhookEndpoint, at time.Time) (current string, previous []string, err error) {
	if len(ep.secret) == 0 {
		return "", nil, errNoWebhookSecret
	}
	if current, err = s.openWebhookSecret(merchantID, mode, ep.secret); err != nil {
		return "", nil, err
	}
	if len(ep.previous) > 0 && ep.previousUntil != nil && at.Before(*ep.previousUntil) {
		old, err := s.openWebhookSecret(merchantID, mode, ep.previous)
		if err != nil {
			return "", nil, err
		}
		previous = []string{old}
	}
	return current, previous, nil
}

// RolledWebhookSecret is a new webhook secret, shown this once.
type RolledWebhookSecret struct {
	Secret   string
	Livemode bool
	// PreviousExpiresAt is when the replaced secret stops signing; nil when
	// it stopped at once (an overlap of 0, or there was none).
	PreviousExpiresAt *time.Time
}

// RollWebhookSecret replaces the webhook secret of the caller's key's mode
// with a new one of the Standard Webhooks form and returns it. The replaced
// secret keeps signing deliveries next to the new one for overlapSeconds
// (nil: DefaultWebhookSecretOverlap; 0: it stops at once; at most
// MaxWebhookSecretOverlap); a secret still in an earlier roll's overlap
// stops at once. The other mode's secret is untouched.
func (s *Service) RollWebhookSecret(ctx context.Context, auth *MerchantAuth, overlapSeconds *int64) (*RolledWebhookSecret, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	d := DefaultWebhookSecretOverlap
	if overlapSeconds != nil {
		limit := int64(MaxWebhookSecretOverlap / time.Second)
		if *overlapSeconds < 0 || *overlapSeconds > limit {
			return nil, Invalid("overlap_seconds", "must be from 0 to %d (7 days)", limit)
		}
		d = time.Duration(*overlapSeconds) * time.Second
	}
	mode := auth.Mode
	plain, sealed, err := s.newWebhookSecret(auth.Merchant.ID, mode)
	if err != nil {
		return nil, err
	}
	out := &RolledWebhookSecret{Secret: plain, Livemode: mode == ModeLive}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		m, err := store.ForUpdate(s.cfg.DB, tx.Merchant.Query().Where(merchant.ID(auth.Merchant.ID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading merchant: %w", err)
		}
		if !m.Active {
			return errMerchantDeactivated
		}
		// The secret being replaced overlaps only if there is one.
		var previous []byte
		var until *time.Time
		if cur := webhookEndpointOf(m, mode).secret; len(cur) > 0 && d > 0 {
			t := s.now().UTC().Add(d)
			previous, until = cur, &t
		}
		u := tx.Merchant.UpdateOneID(m.ID)
		switch {
		case mode == ModeLive && until != nil:
			u.SetWebhookSecretEncrypted(sealed).SetWebhookSecretPreviousEncrypted(previous).SetWebhookSecretPreviousExpiresAt(*until)
		case mode == ModeLive:
			u.SetWebhookSecretEncrypted(sealed).ClearWebhookSecretPreviousEncrypted().ClearWebhookSecretPreviousExpiresAt()
		case until != nil:
			u.SetTestWebhookSecretEncrypted(sealed).SetTestWebhookSecretPreviousEncrypted(previous).SetTestWebhookSecretPreviousExpiresAt(*until)
		default:
			u.SetTestWebhookSecretEncrypted(sealed).ClearTestWebhookSecretPreviousEncrypted().ClearTestWebhookSecretPreviousExpiresAt()
		}
		out.PreviousExpiresAt = until
		return u.Exec(ctx)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
