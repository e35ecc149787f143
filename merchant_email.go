package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"html"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/dashboardsession"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantemailconfirmation"
	"agentpay/ent/merchantmember"
	"agentpay/internal/ratelimit"
	"agentpay/internal/vault"
)

// A merchant's contact e-mail makes the account of that address the
// merchant's owner (merchant_members.go), so it counts only once the address
// has shown it receives mail (docs/dashboard.md, docs/security.md):
//
//   - Registration and every change of the e-mail (REST PATCH, GraphQL
//     updateMerchant, the dashboard: all UpdateMerchant) send a
//     confirmation link, {app_url}/confirm-email/<token>, queued in the
//     change's transaction. Until it is followed the merchant's
//     email_verified_at is NULL and no account owns it through the address.
//     The token is 256 random bits, stored hashed, single use, and valid for
//     MerchantEmailConfirmationTTL; opening the link (GET) only shows it,
//     the page's POST confirms (ConfirmMerchantEmail), as sign-in links do,
//     so mail scanners cannot. A link confirms only the address it was sent
//     to, while it is still the contact e-mail.
//   - A change of the e-mail ends the ownership the previous address had by
//     its confirmation (its membership row and dashboard sessions), in the
//     change's transaction; owners invited by name keep theirs.
//   - Merchants registered before this (the migration marks them,
//     email_confirms_on_signin) are confirmed by the address's first
//     e-mailed sign-in, which proves the same thing
//     (confirmMerchantEmailsOnSignIn), or were confirmed by the migration
//     when the address had signed in by an e-mailed link before.
//   - A merchant has at most one live link: saving the same unconfirmed
//     e-mail again mails a new one only once the last has expired, and
//     MerchantEmailConfirmationsPerDay bounds the confirmations one
//     merchant sends a UTC day (e-mail changes included).

// MerchantEmailConfirmationTTL is how long a confirmation link works.
const MerchantEmailConfirmationTTL = 7 * 24 * time.Hour

// MerchantEmailConfirmationsPerDay bounds the confirmation mails one
// merchant sends per UTC day, counted across instances: every change of the
// e-mail mails the new address, and whoever holds the live key may change
// it, to anyone's address.
const MerchantEmailConfirmationsPerDay = 5

var merchantEmailScheme = ratelimit.Scheme{
	Name: "merchant_email", IDType: "uuid",
	Windows: func(string) []ratelimit.Window {
		return []ratelimit.Window{{Name: "day", Seconds: 24 * 3600, Limit: MerchantEmailConfirmationsPerDay}}
	},
}

// allowMerchantEmailConfirmation counts one confirmation mail of a
// merchant; past the day's bound, a *RateLimitError.
func (s *Service) allowMerchantEmailConfirmation(ctx context.Context, merchantID uuid.UUID) error {
	dec, err := s.rates.merchantEmails.Allow(ctx, ratelimit.Subject[uuid.UUID]{ID: merchantID})
	return rateRefusal(dec, err, "contact e-mail confirmations", " of one merchant")
}

// merchantEmailNeedsLink reports whether saving a merchant's contact
// e-mail as email mails a confirmation link: a new address always, the
// same one while unconfirmed and without a live link (the last expired,
// or it never had one: a merchant registered before confirmations).
func (s *Service) merchantEmailNeedsLink(ctx context.Context, db *ent.Client, m *ent.Merchant, email string) (bool, error) {
	key := merchantEmailKey(email)
	if key != m.EmailNormalized {
		return true, nil
	}
	if m.EmailVerifiedAt != nil {
		return false, nil
	}
	live, err := db.MerchantEmailConfirmation.Query().
		Where(merchantemailconfirmation.MerchantID(m.ID), merchantemailconfirmation.Email(key),
			merchantemailconfirmation.UsedAtIsNil(), merchantemailconfirmation.ExpiresAtGT(s.now().UTC())).
		Exist(ctx)
	if err != nil {
		return false, fmt.Errorf("reading e-mail confirmations: %w", err)
	}
	return !live, nil
}

// sendMerchantEmailConfirmation records a confirmation link for the
// merchant's contact e-mail (as m has it) and queues its mail, in tx.
func (s *Service) sendMerchantEmailConfirmation(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx, m *ent.Merchant) error {
	to, err := NormalizeEmail(m.Email)
	if err != nil {
		return err
	}
	token := vault.MerchantEmailToken.New()
	now := s.now().UTC().Truncate(time.Microsecond)
	expires := now.Add(MerchantEmailConfirmationTTL)
	if err := tx.MerchantEmailConfirmation.Create().
		SetMerchantID(m.ID).
		SetEmail(m.EmailNormalized).
		SetTokenHash(vault.HashSecret(token)).
		SetExpiresAt(expires).
		SetCreatedAt(now).
		SetUpdatedAt(now).
		Exec(ctx); err != nil {
		return fmt.Errorf("recording e-mail confirmation: %w", err)
	}
	link := s.appURL("/confirm-email/" + token)
	_, err = s.queueMail(ctx, tx, sqlTx, Mail{
		To:      to,
		Subject: fmt.Sprintf("Confirm %s's contact e-mail on agentpay", m.Name),
		Text: fmt.Sprintf("This address was given as the contact e-mail of the merchant %s on agentpay. "+
			"Confirming it makes the agentpay account of this address the merchant's owner (its dashboard: payouts, keys, refunds).\n\n"+
			"Confirm within 7 days: %s\n\nIf you do not manage this merchant, ignore this e-mail: nothing changes unless you confirm.\n",
			m.Name, link),
		HTML: fmt.Sprintf(`<p>This address was given as the contact e-mail of the merchant <b>%s</b> on agentpay. `+
			`Confirming it makes the agentpay account of this address the merchant's owner (its dashboard: payouts, keys, refunds).</p>`+
			`<p><a href="%s">Confirm the address</a> within 7 days.</p><p>If you do not manage this merchant, ignore this e-mail: nothing changes unless you confirm.</p>`,
			html.EscapeString(m.Name), html.EscapeString(link)),
		ExpiresAt: expires,
	})
	return err
}

// ErrMerchantEmailLinkInvalid is a confirmation link that is unknown,
// used, expired, or for an address that is no longer the contact e-mail:
// one answer for all.
var ErrMerchantEmailLinkInvalid = fmt.Errorf("%w: this confirmation link is invalid, used or expired", ErrNotFound)

// MerchantEmailLink is what a confirmation link's page shows.
type MerchantEmailLink struct {
	MerchantName string
	Email        string
}

// CheckMerchantEmailLink reads a confirmation link without using it (the
// GET page).
func (s *Service) CheckMerchantEmailLink(ctx context.Context, token string) (*MerchantEmailLink, error) {
	c, m, err := s.liveMerchantEmailLink(ctx, s.cfg.DB.Ent, token)
	if err != nil {
		return nil, err
	}
	return &MerchantEmailLink{MerchantName: m.Name, Email: c.Email}, nil
}

// ConfirmMerchantEmail spends a confirmation link (the page's POST) and
// confirms the merchant's contact e-mail: the account of that address,
// verified, is its owner from its next request. Spent by a conditional
// update, so two uses racing confirm once.
func (s *Service) ConfirmMerchantEmail(ctx context.Context, token string) (*MerchantEmailLink, error) {
	var out *MerchantEmailLink
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		c, m, err := s.liveMerchantEmailLink(ctx, tx.Client(), token)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		n, err := tx.MerchantEmailConfirmation.Update().
			Where(merchantemailconfirmation.ID(c.ID), merchantemailconfirmation.UsedAtIsNil()).
			SetUsedAt(now).SetUpdatedAt(now).Save(ctx)
		if err != nil {
			return fmt.Errorf("spending confirmation link: %w", err)
		}
		if n == 0 {
			return ErrMerchantEmailLinkInvalid
		}
		// Conditional on the address still being the contact e-mail: a
		// change committed meanwhile wins.
		if _, err := tx.Merchant.Update().
			Where(merchant.ID(m.ID), merchant.EmailNormalized(c.Email)).
			SetEmailVerifiedAt(now).
			SetEmailConfirmsOnSignin(false).
			Save(ctx); err != nil {
			return fmt.Errorf("confirming contact e-mail: %w", err)
		}
		out = &MerchantEmailLink{MerchantName: m.Name, Email: c.Email}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) liveMerchantEmailLink(ctx context.Context, db *ent.Client, token string) (*ent.MerchantEmailConfirmation, *ent.Merchant, error) {
	if !vault.MerchantEmailToken.Valid(token) {
		return nil, nil, ErrMerchantEmailLinkInvalid
	}
	c, err := db.MerchantEmailConfirmation.Query().
		Where(merchantemailconfirmation.TokenHash(vault.HashSecret(token))).Only(ctx)
	if ent.IsNotFound(err) {
		return nil, nil, ErrMerchantEmailLinkInvalid
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading confirmation link: %w", err)
	}
	if c.UsedAt != nil || !s.now().Before(c.ExpiresAt) {
		return nil, nil, ErrMerchantEmailLinkInvalid
	}
	m, err := db.Merchant.Get(ctx, c.MerchantID)
	if err != nil {
		return nil, nil, fmt.Errorf("reading merchant: %w", err)
	}
	if m.EmailNormalized != c.Email {
		return nil, nil, ErrMerchantEmailLinkInvalid
	}
	return c, m, nil
}

// confirmMerchantEmailsOnSignIn confirms the contact e-mail of the
// merchants registered before confirmation links whose address has just
// signed in by an e-mailed link (CompleteSignIn), in tx.
func (s *Service) confirmMerchantEmailsOnSignIn(ctx context.Context, tx *ent.Tx, email string, now time.Time) error {
	if _, err := tx.Merchant.Update().
		Where(merchant.EmailNormalized(merchantEmailKey(email)), merchant.EmailConfirmsOnSignin(true),
			merchant.EmailVerifiedAtIsNil()).
		SetEmailVerifiedAt(now).
		SetEmailConfirmsOnSignin(false).
		Save(ctx); err != nil {
		return fmt.Errorf("confirming contact e-mails: %w", err)
	}
	return nil
}

// dropContactOwnership ends what a merchant's previous contact address had
// by its confirmation, in the transaction that changes the address: the
// membership claimMemberships made for it, and that account's dashboard
// sessions of the merchant. A member invited by name (invited_by set)
// keeps its own row.
func (s *Service) dropContactOwnership(ctx context.Context, tx *ent.Tx, merchantID uuid.UUID, oldEmail string) error {
	rows, err := tx.MerchantMember.Query().
		Where(merchantmember.MerchantID(merchantID), merchantmember.Email(oldEmail), merchantmember.InvitedByIsNil()).
		All(ctx)
	if err != nil {
		return fmt.Errorf("reading the contact e-mail's membership: %w", err)
	}
	for _, mm := range rows {
		if err := tx.MerchantMember.DeleteOneID(mm.ID).Exec(ctx); err != nil {
			return fmt.Errorf("removing the contact e-mail's membership: %w", err)
		}
		if mm.UserID == nil {
			continue
		}
		if err := tx.DashboardSession.Update().
			Where(dashboardsession.MerchantID(merchantID), dashboardsession.UserID(*mm.UserID), dashboardsession.RevokedAtIsNil()).
			SetRevokedAt(s.now().UTC()).Exec(ctx); err != nil {
			return fmt.Errorf("revoking the previous owner's dashboard sessions: %w", err)
		}
	}
	return nil
}
