package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/ent/schematype"
	"agentpay/internal/store"
)

// TokenUSDC is the only token merchants accept and sessions take today.
const TokenUSDC = "USDC"

// Settlement types (spec 2.5).
const (
	SettlementCryptoUSDC = "crypto_usdc"
	SettlementFiatPix    = "fiat_pix"
)

// TokenRef names one token on one chain, e.g. {Chain: "base", Token: "USDC"}.
type TokenRef = schematype.TokenRef

// DefaultAcceptedTokens is what a merchant accepts unless it says otherwise:
// USDC on every chain, in the API's chain order.
func DefaultAcceptedTokens() []TokenRef {
	out := make([]TokenRef, 0, len(chains.All))
	for _, c := range chains.All {
		out = append(out, TokenRef{Chain: string(c), Token: TokenUSDC})
	}
	return out
}

// AcceptedTokens is the effective list of (chain, token) pairs a merchant
// accepts: its own list, or the default (USDC on every chain) when it set
// none. The checkout page offers these and select checks against them.
func AcceptedTokens(m *ent.Merchant) []TokenRef {
	if len(m.AcceptedTokens) == 0 {
		return DefaultAcceptedTokens()
	}
	return append([]TokenRef(nil), m.AcceptedTokens...)
}

// MerchantRegistration is a newly registered merchant and its credentials.
type MerchantRegistration struct {
	Merchant *ent.Merchant
	Keys     MerchantKeys
	// DashboardURL is where the merchant's people manage it
	// ({app_url}/dashboard): its contact e-mail's account once confirmed,
	// and whoever signed it up from the app.
	DashboardURL string
}

// RegisterMerchant creates a merchant with the fields of spec 2.5 (name and
// email required) and issues its live and test key pairs and its two
// webhook secrets (one per mode), all in one transaction, with the
// confirmation link of its contact e-mail (merchant_email.go: until it is
// followed, no account owns the merchant). The webhook_url given is both
// modes' (registration is the owner acting for both; each mode's is changed
// apart afterwards). Nothing is written when a field is refused.
func (s *Service) RegisterMerchant(ctx context.Context, in MerchantInput) (*MerchantRegistration, error) {
	return s.registerMerchant(ctx, in, nil)
}

// registerMerchant is RegisterMerchant; a creator (SignUpMerchant's
// signed-in person) is recorded as an owner in the same transaction.
func (s *Service) registerMerchant(ctx context.Context, in MerchantInput, creator *ent.User) (*MerchantRegistration, error) {
	var f merchantFields
	if err := f.apply(in, true, s.webhookMayReachPrivate(ModeTest), s.cfg.Families); err != nil {
		return nil, err
	}
	id := uuid.New()
	whsec, sealed, err := s.newWebhookSecret(id, ModeLive)
	if err != nil {
		return nil, err
	}
	testWhsec, testSealed, err := s.newWebhookSecret(id, ModeTest)
	if err != nil {
		return nil, err
	}
	reg := &MerchantRegistration{Keys: MerchantKeys{WebhookSecret: whsec, TestWebhookSecret: testWhsec}, DashboardURL: s.appURL("/dashboard")}
	if err := s.allowMerchantEmailConfirmation(ctx, id); err != nil {
		return nil, err
	}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		c := tx.Merchant.Create().
			SetID(id).
			SetName(f.name).
			SetEmail(f.email).
			SetEmailNormalized(merchantEmailKey(f.email)).
			SetSettlementType(merchant.SettlementType(f.settlementType)).
			SetSettleHeldPayments(f.settleHeldPayments).
			SetWebhookSecretEncrypted(sealed).
			SetTestWebhookURL(f.webhookURL).
			SetTestWebhookSecretEncrypted(testSealed)
		setOptional(f, c.SetWebsite, c.SetWebhookURL, c.SetSuccessURL, c.SetCancelURL,
			c.SetSettlementAddress, c.SetSettlementChain, c.SetBrandColor)
		if len(f.acceptedTokens) > 0 {
			c.SetAcceptedTokens(f.acceptedTokens)
		}
		m, err := c.Save(ctx)
		if err != nil {
			return fmt.Errorf("creating merchant: %w", err)
		}
		reg.Merchant = m
		for _, mode := range []Mode{ModeLive, ModeTest} {
			if err := insertKeyPair(ctx, tx, id, mode, &reg.Keys); err != nil {
				return err
			}
		}
		if creator != nil {
			if err := s.recordCreatorOwner(ctx, tx, id, creator); err != nil {
				return err
			}
		}
		return s.sendMerchantEmailConfirmation(ctx, tx, sqlTx, m)
	})
	if err != nil {
		return nil, err
	}
	return reg, nil
}

var errMerchantDeactivated = fmt.Errorf("%w: merchant is deactivated", ErrForbidden)

// MerchantProfile is a merchant as one of its keys sees it.
type MerchantProfile struct {
	Merchant *ent.Merchant
	// LivePublicKey and TestPublicKey are the current (unrolled) public keys.
	LivePublicKey, TestPublicKey string
	// WebhookURL is the key's mode's webhook URL: a test key never sees the
	// live one.
	WebhookURL string
}

// MerchantProfile returns the merchant's profile as a key of mode sees it.
func (s *Service) MerchantProfile(ctx context.Context, m *ent.Merchant, mode Mode) (*MerchantProfile, error) {
	keys, err := s.cfg.DB.Ent.MerchantKey.Query().
		Where(merchantkey.MerchantID(m.ID), merchantkey.RevokedAtIsNil()).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant keys: %w", err)
	}
	p := &MerchantProfile{Merchant: m, WebhookURL: WebhookURLOf(m, mode)}
	for _, k := range keys {
		if Mode(k.Kind) == ModeLive {
			p.LivePublicKey = k.PublicKey
		} else {
			p.TestPublicKey = k.PublicKey
		}
	}
	return p, nil
}

// UpdateMerchant changes the fields present in in (spec 2.5, all
// optional), with the registration rules; the result must satisfy the
// rules between fields too. Nothing is written when a field is refused.
//
// A live key changes any field, webhook_url being live mode's. A test key
// changes test-mode state only: webhook_url, which is then test mode's;
// any other field is shared by both modes (where settlements are paid, what
// customers see and where they are sent back to), so a test key naming one
// is ErrForbidden and changes nothing.
//
// A new contact e-mail is unconfirmed: its confirmation link is mailed in
// the update's transaction, and the previous address's ownership ends
// (merchant_email.go); saving the same unconfirmed e-mail mails a new link
// when the last one expired. Past MerchantEmailConfirmationsPerDay such
// mails, the update is a *RateLimitError and changes nothing.
func (s *Service) UpdateMerchant(ctx context.Context, auth *MerchantAuth, in MerchantInput) (*ent.Merchant, error) {
	if err := auth.CheckMutate(); err != nil {
		return nil, err
	}
	if err := s.countMerchantEmailChange(ctx, auth, in); err != nil {
		return nil, err
	}
	var out *ent.Merchant
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		m, err := store.ForUpdate(s.cfg.DB, tx.Merchant.Query().Where(merchant.ID(auth.Merchant.ID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading merchant: %w", err)
		}
		if !m.Active {
			return errMerchantDeactivated
		}
		if auth.Mode != ModeLive {
			if names := in.liveOnlyFields(); len(names) > 0 {
				return fmt.Errorf("%w: a test key changes test-mode settings only (webhook_url); %s need a live secret key",
					ErrForbidden, strings.Join(names, ", "))
			}
		}
		f := fieldsOf(m, auth.Mode)
		if err := f.apply(in, false, s.webhookMayReachPrivate(auth.Mode), s.cfg.Families); err != nil {
			return err
		}
		if auth.Mode != ModeLive {
			if f.webhookURL != "" && len(m.TestWebhookSecretEncrypted) == 0 {
				return Invalid("webhook_url", "test mode has no webhook secret yet: roll one first (%s with a test key)", ActionRollWebhookSecret.Mark())
			}
			out, err = tx.Merchant.UpdateOneID(m.ID).SetTestWebhookURL(f.webhookURL).Save(ctx)
			if err != nil {
				return fmt.Errorf("updating merchant: %w", err)
			}
			return nil
		}
		mailLink, err := s.merchantEmailNeedsLink(ctx, tx.Client(), m, f.email)
		if err != nil {
			return err
		}
		u := tx.Merchant.UpdateOneID(m.ID).
			SetName(f.name).
			SetEmail(f.email).
			SetEmailNormalized(merchantEmailKey(f.email)).
			SetSettlementType(merchant.SettlementType(f.settlementType)).
			SetSettleHeldPayments(f.settleHeldPayments)
		if merchantEmailKey(f.email) != m.EmailNormalized {
			u.ClearEmailVerifiedAt().SetEmailConfirmsOnSignin(false)
			if err := s.dropContactOwnership(ctx, tx, m.ID, m.EmailNormalized); err != nil {
				return err
			}
		}
		setOptional(f, u.SetWebsite, u.SetWebhookURL, u.SetSuccessURL, u.SetCancelURL,
			u.SetSettlementAddress, u.SetSettlementChain, u.SetBrandColor)
		if len(f.acceptedTokens) > 0 {
			u.SetAcceptedTokens(f.acceptedTokens)
		} else {
			u.ClearAcceptedTokens()
		}
		out, err = u.Save(ctx)
		if err != nil {
			return fmt.Errorf("updating merchant: %w", err)
		}
		if mailLink {
			return s.sendMerchantEmailConfirmation(ctx, tx, sqlTx, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// countMerchantEmailChange counts, before UpdateMerchant's transaction (the
// counters are not in it), the confirmation mail a live update of the
// contact e-mail will send, refusing it past the day's bound. An e-mail
// the update will refuse anyway is not counted.
func (s *Service) countMerchantEmailChange(ctx context.Context, auth *MerchantAuth, in MerchantInput) error {
	if auth.Mode != ModeLive || in.Email == nil {
		return nil
	}
	email := strings.TrimSpace(*in.Email)
	if validateEmail(email) != nil {
		return nil
	}
	m, err := s.cfg.DB.Ent.Merchant.Get(ctx, auth.Merchant.ID)
	if err != nil {
		return fmt.Errorf("reading merchant: %w", err)
	}
	needs, err := s.merchantEmailNeedsLink(ctx, s.cfg.DB.Ent, m, email)
	if err != nil || !needs {
		return err
	}
	return s.allowMerchantEmailConfirmation(ctx, m.ID)
}

// DeactivateMerchant turns a merchant off (`agentpay admin
// deactivate-merchant`): every merchant API call with its keys then answers
// 403. It returns the merchant; deactivating twice keeps the first
// deactivation time. An unknown id is ErrNotFound.
func (s *Service) DeactivateMerchant(ctx context.Context, id uuid.UUID) (*ent.Merchant, error) {
	return s.setMerchantActive(ctx, id, false)
}

// ReactivateMerchant undoes DeactivateMerchant.
func (s *Service) ReactivateMerchant(ctx context.Context, id uuid.UUID) (*ent.Merchant, error) {
	return s.setMerchantActive(ctx, id, true)
}

var errMerchantNotFound = fmt.Errorf("%w: no such merchant", ErrNotFound)

func (s *Service) setMerchantActive(ctx context.Context, id uuid.UUID, active bool) (*ent.Merchant, error) {
	var (
		out     *ent.Merchant
		changed bool
	)
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		m, err := store.ForUpdate(s.cfg.DB, tx.Merchant.Query().Where(merchant.ID(id))).Only(ctx)
		if ent.IsNotFound(err) {
			return errMerchantNotFound
		}
		if err != nil {
			return err
		}
		if m.Active == active {
			out = m
			return nil
		}
		u := tx.Merchant.UpdateOneID(id).SetActive(active)
		if active {
			u.ClearDeactivatedAt()
		} else {
			u.SetDeactivatedAt(s.now().UTC())
		}
		out, err = u.Save(ctx)
		changed = true
		return err
	})
	if err != nil {
		return nil, err
	}
	if changed && !active {
		// Every instance refuses the merchant's keys once this returns
		// (their cached entries have expired).
		s.merchantAuth.WaitTTL(ctx)
	}
	return out, nil
}

// MerchantByID returns a merchant; an unknown id is ErrNotFound.
func (s *Service) MerchantByID(ctx context.Context, id uuid.UUID) (*ent.Merchant, error) {
	m, err := s.cfg.DB.Ent.Merchant.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, errMerchantNotFound
	}
	return m, err
}
