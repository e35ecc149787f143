package agentpay

// Fuzz targets of the validators that take outside input. Seeds are in
// testdata/fuzz/<target>; `make fuzz` runs each target (docs/testing.md).

import (
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"agentpay/webhook"
)

// usernameRule is spec 2.1's username rule, written independently of
// ValidateUsername: 3 to 30 of a-z, 0-9 and _, not starting or ending with _.
var usernameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{1,28}[a-z0-9]$`)

// FuzzValidateUsername: ValidateUsername accepts exactly what the rule
// allows, and refuses everything else with a validation error on username.
func FuzzValidateUsername(f *testing.F) {
	f.Fuzz(func(t *testing.T, username string) {
		err := ValidateUsername(username)
		if want := usernameRule.MatchString(username); want != (err == nil) {
			t.Fatalf("ValidateUsername(%q) = %v; the rule says valid=%v", username, err, want)
		}
		requireFieldError(t, err, "username")
	})
}

// FuzzValidateEmail: an accepted e-mail address is one mail.ParseAddress
// reads back unchanged, at most EmailMaxLen bytes, with a local part, a
// dotted domain and no space, angle bracket or control character.
func FuzzValidateEmail(f *testing.F) {
	f.Fuzz(func(t *testing.T, email string) {
		err := validateEmail(email)
		requireFieldError(t, err, "email")
		if err != nil {
			return
		}
		a, perr := mail.ParseAddress(email)
		at := strings.LastIndexByte(email, '@')
		switch {
		case perr != nil || a.Address != email:
			t.Fatalf("accepted %q, which does not read back as itself", email)
		case len(email) > EmailMaxLen:
			t.Fatalf("accepted %d bytes", len(email))
		case at < 1 || !strings.Contains(email[at+1:], "."):
			t.Fatalf("accepted %q without a local part and a dotted domain", email)
		case strings.ContainsAny(email, " \t\r\n<>") || hasControl(email):
			t.Fatalf("accepted %q with a space, bracket or control character", email)
		}
	})
}

// FuzzValidateURL: an accepted URL (website, success and cancel URLs) is
// an absolute http(s) URL with a host, at most URLMaxLen bytes, without
// whitespace or control characters, and reads back as itself.
func FuzzValidateURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string, emptyOK bool) {
		err := validateURL("website", raw, emptyOK)
		requireFieldError(t, err, "website")
		if err != nil || raw == "" {
			if raw == "" && emptyOK && err != nil {
				t.Fatalf("an empty URL is refused where it may be cleared: %v", err)
			}
			return
		}
		requireAbsoluteHTTPURL(t, raw, URLMaxLen)
	})
}

// FuzzValidateWebhookURL: a webhook URL accepted where only public targets
// are allowed (live mode, and test mode without WEBHOOK_ALLOW_PRIVATE) is an
// absolute http(s) URL whose host is not localhost and not an IP literal
// outside the public ranges, in any of the forms url.Parse and netip read
// (IPv4-mapped IPv6, zones, trailing dots, upper case).
func FuzzValidateWebhookURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string, publicOnly bool) {
		// publicOnly: live mode, or test mode without WEBHOOK_ALLOW_PRIVATE.
		err := ValidateWebhookURL(raw, !publicOnly)
		requireFieldError(t, err, "webhook_url")
		if err != nil {
			return
		}
		u := requireAbsoluteHTTPURL(t, raw, webhookURLMax)
		if !publicOnly {
			return
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			t.Fatalf("public-only webhook URL %q points at localhost", raw)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			ip = ip.Unmap()
			if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
				ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || !webhook.IsPublicAddr(ip) {
				t.Fatalf("public-only webhook URL %q points at non-public %s", raw, ip)
			}
		}
	})
}

// FuzzToBaseUnits: an amount read from a client converts to base units
// exactly (never rounded) or is refused; what converts reads back as the
// same amount. validateSendAmount's answer fits int64 and is at least the
// minimum send.
func FuzzToBaseUnits(f *testing.F) {
	f.Fuzz(func(t *testing.T, amount string, decimals uint8) {
		d, err := decimal.NewFromString(amount)
		if err != nil {
			return
		}
		dec := int32(decimals % 19)
		units, err := ToBaseUnits("amount", d, dec)
		requireFieldError(t, err, "amount")
		if err == nil && !FromBaseUnits(units, dec).Equal(d) {
			t.Fatalf("%s with %d decimals became %s base units, which read back as %s", amount, dec, units, FromBaseUnits(units, dec))
		}
		if err != nil && d.Equal(d.Truncate(dec)) {
			t.Fatalf("%s has at most %d decimals, refused: %v", amount, dec, err)
		}
		n, err := validateSendAmount(d)
		requireFieldError(t, err, "amount_usd")
		if err == nil && (USDCAmount(n).Cmp(d) != 0 || d.LessThan(MinSendUSD)) {
			t.Fatalf("send amount %s became %d base units", amount, n)
		}
	})
}

// FuzzParseIdempotencyKey: an accepted Idempotency-Key is 1 to 255
// printable ASCII characters; a bare value is the key itself; and a key
// written in the quoted form reads back as the same key, so `abc` and
// `"abc"` name one request.
func FuzzParseIdempotencyKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		key, err := ParseIdempotencyKey(raw)
		requireFieldError(t, err, "Idempotency-Key")
		if err != nil {
			return
		}
		if key == "" || len(key) > IdempotencyKeyMaxLen || hasControl(key) || strings.IndexFunc(key, func(r rune) bool { return r > 0x7e }) >= 0 {
			t.Fatalf("%q accepted as %q", raw, key)
		}
		if !strings.HasPrefix(raw, `"`) && key != raw {
			t.Fatalf("bare %q read as %q", raw, key)
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := ParseIdempotencyKey(quoted); err != nil || again != key {
			t.Fatalf("%q quoted as %s reads as %q (%v)", key, quoted, again, err)
		}
	})
}

// requireFieldError fails unless err is nil or a validation error on field.
func requireFieldError(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		return
	}
	verr, ok := err.(*ValidationError)
	if !ok || verr.Field != field {
		t.Fatalf("error %v (%T) is not a validation error on %s", err, err, field)
	}
}

func requireAbsoluteHTTPURL(t *testing.T, raw string, maxLen int) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		t.Fatalf("accepted %q, which does not parse: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		t.Fatalf("accepted %q with scheme %q", raw, u.Scheme)
	case u.Hostname() == "":
		t.Fatalf("accepted %q without a host", raw)
	case len(raw) > maxLen:
		t.Fatalf("accepted %d bytes", len(raw))
	case strings.ContainsAny(raw, " \t\r\n") || hasControl(raw):
		t.Fatalf("accepted %q with whitespace or a control character", raw)
	}
	return u
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
