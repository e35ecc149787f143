package agentpay

import (
	"context"
	"database/sql"
	"fmt"

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
}

// RegisterMerchant creates a merchant with the fields of spec 2.5 (name and
// email required) and issues its live and test key pairs and its webhook
// secret, all in one transaction. Nothing is written when a field is
// refused.
func (s *Service) RegisterMerchant(ctx context.Context, in MerchantInput) (*MerchantRegistration, error) {
	var f merchantFields
	if err := f.apply(in, true, ModeTest, s.cfg.Families); err != nil {
		return nil, err
	}
	id := uuid.New()
	whsec, sealed, err := s.newWebhookSecret(id)
	if err != nil {
		return nil, err
	}
	reg := &MerchantRegistration{Keys: MerchantKeys{WebhookSecret: whsec}}
	err = s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		c := tx.Merchant.Create().
			SetID(id).
			SetName(f.name).
			SetEmail(f.email).
			SetSettlementType(merchant.SettlementType(f.settlementType)).
			SetWebhookSecretEncrypted(sealed)
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
		return insertKeyPairs(ctx, tx, id, &reg.Keys)
	})
	if err != nil {
		return nil, err
	}
	return reg, nil
}

var errMerchantDeactivated = fmt.Errorf("%w: merchant is deactivated", ErrForbidden)

// MerchantProfile is a merchant with its current public keys.
type MerchantProfile struct {
	Merchant *ent.Merchant
	// LivePublicKey and TestPublicKey are the current (unrolled) public keys.
	LivePublicKey, TestPublicKey string
}

// MerchantProfile returns the merchant's profile with its public keys.
func (s *Service) MerchantProfile(ctx context.Context, m *ent.Merchant) (*MerchantProfile, error) {
	keys, err := s.cfg.DB.Ent.MerchantKey.Query().
		Where(merchantkey.MerchantID(m.ID), merchantkey.RevokedAtIsNil()).
		All(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading merchant keys: %w", err)
	}
	p := &MerchantProfile{Merchant: m}
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
func (s *Service) UpdateMerchant(ctx context.Context, auth *MerchantAuth, in MerchantInput) (*ent.Merchant, error) {
	var out *ent.Merchant
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		m, err := store.ForUpdate(s.cfg.DB, tx.Merchant.Query().Where(merchant.ID(auth.Merchant.ID))).Only(ctx)
		if err != nil {
			return fmt.Errorf("reading merchant: %w", err)
		}
		if !m.Active {
			return errMerchantDeactivated
		}
		f := fieldsOf(m)
		if err := f.apply(in, false, auth.Mode, s.cfg.Families); err != nil {
			return err
		}
		u := tx.Merchant.UpdateOneID(m.ID).
			SetName(f.name).
			SetEmail(f.email).
			SetSettlementType(merchant.SettlementType(f.settlementType))
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
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
