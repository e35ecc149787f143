package agentpay

import (
	"net/mail"
	"net/url"
	"sort"
	"strings"
	"unicode"

	"agentpay/chains"
	"agentpay/ent"
)

// Merchant field rules (spec 2.5). The spec gives no lengths; these bound
// what a checkout page and an e-mail client can show.
const (
	MerchantNameMaxLen = 200
	EmailMaxLen        = 254 // RFC 5321 path limit
	URLMaxLen          = 2048
)

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
	// SettleHeldPayments: held payments (late, over-, repeat) are paid out
	// in the next settlement batch like counted ones when true, held until
	// refunded when false (the default).
	SettleHeldPayments *bool
}

// merchantFields is a merchant's editable state, validated as a whole so
// that rules between fields (settlement address versus chain) hold after a
// partial update too.
type merchantFields struct {
	name, email, website, webhookURL, successURL, cancelURL string
	settlementType, settlementAddress, settlementChain      string
	acceptedTokens                                          []TokenRef
	brandColor                                              string
	settleHeldPayments                                      bool
}

// liveOnlyFields names the fields present in in that only a live key may
// change: all but webhook_url, which each mode has its own of. The others
// are shared by both modes, so changing them reaches live mode.
func (in MerchantInput) liveOnlyFields() []string {
	var out []string
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"name", in.Name != nil}, {"email", in.Email != nil}, {"website", in.Website != nil},
		{"success_url", in.SuccessURL != nil}, {"cancel_url", in.CancelURL != nil},
		{"settlement_type", in.SettlementType != nil}, {"settlement_address", in.SettlementAddress != nil},
		{"settlement_chain", in.SettlementChain != nil}, {"accepted_tokens", in.AcceptedTokens != nil},
		{"brand_color", in.BrandColor != nil}, {"settle_held_payments", in.SettleHeldPayments != nil},
	} {
		if f.present {
			out = append(out, f.name)
		}
	}
	return out
}

// fieldsOf is the merchant's editable state as a key of mode sees it: the
// shared fields and that mode's webhook URL.
func fieldsOf(m *ent.Merchant, mode Mode) merchantFields {
	return merchantFields{
		name: m.Name, email: m.Email, website: m.Website, webhookURL: WebhookURLOf(m, mode),
		successURL: m.SuccessURL, cancelURL: m.CancelURL,
		settlementType: string(m.SettlementType), settlementAddress: m.SettlementAddress,
		settlementChain: m.SettlementChain, acceptedTokens: m.AcceptedTokens, brandColor: m.BrandColor,
		settleHeldPayments: m.SettleHeldPayments,
	}
}

// apply overlays the present fields of in, checking each one given, in the
// order of spec 2.5; then the rules between fields. webhookPrivateOK is
// whether webhook_url may name a private or loopback host
// (ValidateWebhookURL): Service.webhookMayReachPrivate of the mode of the
// key making the change; a registration has no key and is checked as test
// mode, since every delivery checks the address it dials anyway. families
// reads settlement addresses.
func (f *merchantFields) apply(in MerchantInput, register bool, webhookPrivateOK bool, families chains.Families) error {
	if register {
		if in.Name == nil {
			return Invalid("name", "is required")
		}
		if in.Email == nil {
			return Invalid("email", "is required")
		}
	}
	if in.SettleHeldPayments != nil {
		f.settleHeldPayments = *in.SettleHeldPayments
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
			if err := ValidateWebhookURL(u, webhookPrivateOK); err != nil {
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
		if c != "" {
			if _, err := BrandColorsFor(c); err != nil { // merchant_brand.go
				return err
			}
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
		hasSpaceOrControl(raw) {
		return Invalid(field, "must be an absolute http or https URL")
	}
	return nil
}

// hasSpaceOrControl: a URL the service stores, then dials or sends a
// browser to, holds no whitespace or control character anywhere. url.Parse
// takes a space in a path, which a receiver, a proxy or a log would read
// differently from the service (found by FuzzValidateWebhookURL).
func hasSpaceOrControl(raw string) bool {
	return strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0
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
