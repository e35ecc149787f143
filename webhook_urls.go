package agentpay

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"agentpay/webhook"
)

// Where a mode's deliveries may go (webhookMayReachPrivate), the clients that
// send them, and the check of a merchant's webhook URL when it is set. The
// HTTP post itself, which decides nothing, is internal/webhooksend's.

// webhookURLMax bounds a merchant's webhook URL.
const webhookURLMax = 2048

// errNoWebhookURL is the attempt log's error of a try whose merchant has
// removed the webhook URL of its mode: nothing was sent.
var errNoWebhookURL = errors.New("not sent: the webhook URL of this mode was removed; set one and the next retry goes there")

// truncateUTF8 cuts s to n bytes at most, on a character boundary, marking
// the cut with an ellipsis (errors kept in the attempt log, notes).
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// webhookMayReachPrivate is the rule of where a mode's deliveries may go:
// public addresses only, except test mode when the operator allows more
// (Config.WebhookAllowPrivate, so a developer's local receiver works). Live
// events always stay off private networks. Anyone can register a merchant
// and read its attempt log, so test mode reaching the service's own network
// by default would hand every merchant a probe of it.
func (s *Service) webhookMayReachPrivate(mode Mode) bool {
	return mode == ModeTest && s.cfg.WebhookAllowPrivate
}

// newWebhookClient builds the client that sends a mode's deliveries, held
// to webhookMayReachPrivate when it connects.
func (s *Service) newWebhookClient(mode Mode) *http.Client {
	return s.newWebhookClientWith(mode, nil)
}

// newWebhookClientWith is newWebhookClient looking names up with resolver
// (nil: the system's); tests resolve names their own way with it.
func (s *Service) newWebhookClientWith(mode Mode, resolver *net.Resolver) *http.Client {
	return webhook.NewClient(webhook.ClientOptions{Timeout: WebhookTimeout, PublicOnly: !s.webhookMayReachPrivate(mode), Resolver: resolver})
}

// webhookClient is the client of a delivery's mode.
func (s *Service) webhookClient(livemode bool) *http.Client {
	if livemode {
		return s.liveWebhooks
	}
	return s.testWebhooks
}

// ValidateWebhookURL checks a merchant's webhook URL when it is registered or
// changed: an absolute http or https URL with a host, at most 2,048
// characters; unless privateOK (webhookMayReachPrivate of the mode), not
// "localhost" (or a name under .localhost) and not an IP literal outside the
// public ranges. Names are not resolved here: the address actually dialled
// is checked at every delivery.
func ValidateWebhookURL(raw string, privateOK bool) error {
	const field = "webhook_url"
	if raw == "" || hasSpaceOrControl(raw) {
		return Invalid(field, "must be an http or https URL")
	}
	if len(raw) > webhookURLMax {
		return Invalid(field, "must be at most %d characters long", webhookURLMax)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return Invalid(field, "must be an http or https URL")
	}
	host := u.Hostname()
	if host == "" {
		return Invalid(field, "must include a host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return Invalid(field, "has an invalid port")
		}
	}
	if privateOK {
		return nil
	}
	if err := webhook.CheckPublicHost(host); errors.Is(err, webhook.ErrLocalhost) {
		return Invalid(field, "must not point at localhost: webhooks go to public addresses only")
	} else if err != nil {
		return Invalid(field, "must not point at a private, loopback or link-local address: webhooks go to public addresses only")
	}
	return nil
}
