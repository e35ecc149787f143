package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/ent/schematype"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// Merchant field rules (spec 2.5). The spec gives no lengths; these bound
// what a checkout page and an e-mail client can show.
const (
	MerchantNameMaxLen = 200
	EmailMaxLen        = 254 // RFC 5321 path limit
	URLMaxLen          = 2048
	// TokenUSDC is the only token merchants accept and sessions take today.
	TokenUSDC = "USDC"
)

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

// MerchantInput holds the fields of spec 2.5. A nil field is absent: at
// registration it takes its default, at update it is left unchanged. At
// update an empty string clears an optional field (name, email and
// settlement_type cannot be cleared).
type MerchantInput struct {
	Name              *string
	Email             *string
	Website           *string
	WebhookURL        *string
	SuccessURL        *string
	CancelURL         *string
	SettlementType    *string
	SettlementAddress *string
	SettlementChain   *string
	// AcceptedTokens: nil is absent; an empty list is refused (omit the
	// field for the default, USDC on every chain).
	AcceptedTokens *[]TokenRef
	BrandColor     *string
}

// merchantFields is a merchant's editable state, validated as a whole so
// that rules between fields (settlement address versus chain) hold after a
// partial update too.
type merchantFields struct {
	name, email, website, webhookURL, successURL, cancelURL string
	settlementType, settlementAddress, settlementChain      string
	acceptedTokens                                          []TokenRef
	brandColor                                              string
}

func fieldsOf(m *ent.Merchant) merchantFields {
	return merchantFields{
		name: m.Name, email: m.Email, website: m.Website, webhookURL: m.WebhookURL,
		successURL: m.SuccessURL, cancelURL: m.CancelURL,
		settlementType: string(m.SettlementType), settlementAddress: m.SettlementAddress,
		settlementChain: m.SettlementChain, acceptedTokens: m.AcceptedTokens, brandColor: m.BrandColor,
	}
}

// apply overlays the present fields of in, checking each one given, in the
// order of spec 2.5; then the rules between fields. mode is the mode of the
// key making the change, which decides how webhook_url is checked
// (ValidateWebhookURL: live refuses loopback and private addresses); a
// registration has no key and is checked as test mode, since every live
// delivery checks the address it dials anyway. families reads settlement
// addresses.
func (f *merchantFields) apply(in MerchantInput, register bool, mode Mode, families chains.Families) error {
	if register {
		if in.Name == nil {
			return Invalid("name", "is required")
		}
		if in.Email == nil {
			return Invalid("email", "is required")
		}
	}
	if in.Name != nil {
		name := strings.TrimSpace(*in.Name)
		switch {
		case name == "":
			return Invalid("name", "is required")
		case len([]rune(name)) > MerchantNameMaxLen:
			return Invalid("name", "must be at most %d characters long", MerchantNameMaxLen)
		}
		f.name = name
	}
	if in.Email != nil {
		email := strings.TrimSpace(*in.Email)
		if err := validateEmail(email); err != nil {
			return err
		}
		f.email = email
	}
	if in.Website != nil {
		if err := validateURL("website", *in.Website, true); err != nil {
			return err
		}
		f.website = *in.Website
	}
	if in.WebhookURL != nil {
		if u := *in.WebhookURL; u != "" {
			if err := ValidateWebhookURL(u, mode); err != nil {
				return err
			}
		}
		f.webhookURL = *in.WebhookURL
	}
	for _, u := range []struct {
		field string
		in    *string
		dst   *string
	}{
		{"success_url", in.SuccessURL, &f.successURL},
		{"cancel_url", in.CancelURL, &f.cancelURL},
	} {
		if u.in == nil {
			continue
		}
		if err := validateURL(u.field, *u.in, true); err != nil {
			return err
		}
		*u.dst = *u.in
	}
	if in.SettlementType != nil {
		switch *in.SettlementType {
		case SettlementCryptoUSDC, SettlementFiatPix:
			f.settlementType = *in.SettlementType
		default:
			return Invalid("settlement_type", "must be crypto_usdc or fiat_pix")
		}
	}
	if in.SettlementAddress != nil {
		f.settlementAddress = strings.TrimSpace(*in.SettlementAddress)
	}
	if in.SettlementChain != nil {
		if c := *in.SettlementChain; c != "" && !chains.Name(c).Valid() {
			return Invalid("settlement_chain", "must be one of base, arbitrum, solana, ethereum, polygon")
		}
		f.settlementChain = *in.SettlementChain
	}
	if in.AcceptedTokens != nil {
		tokens, err := normaliseAcceptedTokens(*in.AcceptedTokens)
		if err != nil {
			return err
		}
		f.acceptedTokens = tokens
	}
	if in.BrandColor != nil {
		c := *in.BrandColor
		if c != "" && !isHexColor(c) {
			return Invalid("brand_color", "must be a hex color of the form #rrggbb")
		}
		f.brandColor = strings.ToLower(c)
	}
	if f.settlementType == "" {
		f.settlementType = SettlementCryptoUSDC
	}
	return f.validateSettlement(families)
}

// validateSettlement checks the settlement address against its chain: for
// the chain named by settlement_chain, or, when none is named (settle on the
// chain paid on), an address valid on EVM chains or on Solana. A named
// settlement chain needs an address to pay.
func (f *merchantFields) validateSettlement(families chains.Families) error {
	addr, chain := f.settlementAddress, chains.Name(f.settlementChain)
	if addr == "" {
		if chain != "" {
			return Invalid("settlement_address", "is required when settlement_chain is set")
		}
		return nil
	}
	_, evmErr := families[chains.FamilyEVM].ParseAddress(addr)
	_, solErr := families[chains.FamilySolana].ParseAddress(addr)
	evmOK, solOK := evmErr == nil, solErr == nil
	switch {
	case chain == "" && !evmOK && !solOK:
		return Invalid("settlement_address", "is not a valid EVM or Solana address")
	case chain == chains.Solana && !solOK:
		return Invalid("settlement_address", "is not a valid Solana address (settlement_chain is solana)")
	case chain.IsEVM() && !evmOK:
		return Invalid("settlement_address", "is not a valid EVM address (settlement_chain is %s)", chain)
	}
	return nil
}

func validateEmail(email string) error {
	switch {
	case email == "":
		return Invalid("email", "is required")
	case len(email) > EmailMaxLen:
		return Invalid("email", "must be at most %d characters long", EmailMaxLen)
	}
	a, err := mail.ParseAddress(email)
	at := strings.LastIndexByte(email, '@')
	if err != nil || a.Address != email || at < 1 || !strings.Contains(email[at+1:], ".") ||
		strings.ContainsAny(email, " \t\r\n<>") {
		return Invalid("email", "is not a valid e-mail address")
	}
	return nil
}

// validateURL accepts an absolute http or https URL with a host; empty is
// allowed when the field may be cleared.
func validateURL(field, raw string, emptyOK bool) error {
	if raw == "" {
		if emptyOK {
			return nil
		}
		return Invalid(field, "must not be empty")
	}
	if len(raw) > URLMaxLen {
		return Invalid(field, "must be at most %d characters long", URLMaxLen)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" ||
		strings.ContainsAny(raw, " \t\r\n") {
		return Invalid(field, "must be an absolute http or https URL")
	}
	return nil
}

func isHexColor(c string) bool {
	if len(c) != 7 || c[0] != '#' {
		return false
	}
	for _, r := range c[1:] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// normaliseAcceptedTokens checks a list of {chain, token} pairs (a known
// chain, token USDC, no pair twice, at least one) and returns it in the
// API's chain order.
func normaliseAcceptedTokens(in []TokenRef) ([]TokenRef, error) {
	if len(in) == 0 {
		return nil, Invalid("accepted_tokens", "must list at least one {chain, token} (omit it for the default: USDC on every chain)")
	}
	seen := map[TokenRef]bool{}
	out := make([]TokenRef, 0, len(in))
	for i, t := range in {
		if !chains.Name(t.Chain).Valid() {
			return nil, Invalid("accepted_tokens", "[%d].chain must be one of base, arbitrum, solana, ethereum, polygon", i)
		}
		if t.Token != TokenUSDC {
			return nil, Invalid("accepted_tokens", "[%d].token must be USDC", i)
		}
		if seen[t] {
			return nil, Invalid("accepted_tokens", "[%d] lists %s %s twice", i, t.Token, t.Chain)
		}
		seen[t] = true
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return chainOrder(chains.Name(out[i].Chain)) < chainOrder(chains.Name(out[j].Chain))
	})
	return out, nil
}

// MerchantKeys are the credentials of a merchant as issued: shown once,
// never again (only public keys and secret key hashes are stored; the
// webhook secret is sealed). WebhookSecret is empty when keys are rolled.
type MerchantKeys struct {
	LivePublicKey, LiveSecretKey string
	TestPublicKey, TestSecretKey string
	WebhookSecret                string
}

// MerchantRegistration is a newly registered merchant and its credentials.
type MerchantRegistration struct {
	Merchant *ent.Merchant
	Keys     MerchantKeys
}

// MerchantKeysWarning tells the merchant the secrets are shown once.
const MerchantKeysWarning = "Store these keys now: secret keys and the webhook secret are shown only once and cannot be retrieved later. Keep secret keys on your server; public keys may be used in the browser."

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
	whsec, _, err := vault.NewSecret(vault.PrefixWebhookSecret)
	if err != nil {
		return nil, err
	}
	sealed, err := s.cfg.Vault.Seal([]byte(whsec), id[:])
	if err != nil {
		return nil, fmt.Errorf("sealing webhook secret: %w", err)
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

// setOptional writes the optional string fields through the given setters,
// in the order website, webhook_url, success_url, cancel_url,
// settlement_address, settlement_chain, brand_color.
func setOptional[B any](f merchantFields, website, webhook, success, cancel, addr, chain, color func(string) B) {
	website(f.website)
	webhook(f.webhookURL)
	success(f.successURL)
	cancel(f.cancelURL)
	addr(f.settlementAddress)
	chain(f.settlementChain)
	color(f.brandColor)
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

// RollMerchantKeys replaces both key pairs of the merchant (live and test)
// and returns the new ones, shown this once; the webhook secret is kept.
// The old keys are revoked in the same transaction, and the answer waits
// until no instance's authentication cache can still hold them, so by then
// every instance refuses them. Only the key the caller authenticated with
// can roll: of two
// concurrent rolls with one key, the second is ErrUnauthorized.
func (s *Service) RollMerchantKeys(ctx context.Context, auth *MerchantAuth) (*MerchantKeys, error) {
	if auth.keyMatch == nil {
		return nil, ErrUnauthorized // not from AuthenticateMerchant
	}
	keys := &MerchantKeys{}
	err := s.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		now := time.Now().UTC()
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
			u.SetDeactivatedAt(time.Now().UTC())
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

// merchantWebhookSecret opens the merchant's webhook signing secret (whsec_...),
// sealed with the merchant's id as associated data.
func (s *Service) merchantWebhookSecret(m *ent.Merchant) (string, error) {
	if len(m.WebhookSecretEncrypted) == 0 {
		return "", errors.New("merchant has no webhook secret")
	}
	plain, err := s.cfg.Vault.Open(m.WebhookSecretEncrypted, m.ID[:])
	if err != nil {
		return "", fmt.Errorf("opening webhook secret of merchant %s: %w", m.ID, err)
	}
	return string(plain), nil
}
