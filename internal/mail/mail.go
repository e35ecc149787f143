package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Message is one e-mail to one address, with a text part and, when HTML is
// not empty, an HTML alternative.
type Message struct {
	// ID is the outbox id; it makes the Message-ID header.
	ID      string
	To      string
	Subject string
	Text    string
	HTML    string
}

// Sender sends one message. A nil error means the transport took it.
type Sender interface {
	Send(ctx context.Context, m Message) error
	// Transport names the sender on the outbox row ("smtp", "catcher").
	Transport() string
}

// Catcher is the dev mail catcher: it accepts everything, sends nothing,
// and keeps the newest CatcherMax messages in memory, for /dev/mail. The
// outbox erases a message's bodies once it is sent, whatever the transport
// (they may carry sign-in and invitation links, which are bearer
// secrets), so the catcher's copy is the only one left: it is seen by the
// process that sent it, which under `agentpay dev` is the one serving
// /dev/mail (the API and the worker run together there).
type Catcher struct {
	now    func() time.Time
	mu     sync.Mutex
	caught []Caught // oldest first
}

// Caught is one message the catcher took, and when.
type Caught struct {
	Message
	At time.Time
}

// CatcherMax is how many messages a Catcher keeps (the newest).
const CatcherMax = 1000

// NewCatcher is an empty catcher; now (nil: time.Now) dates what it takes.
func NewCatcher(now func() time.Time) *Catcher {
	if now == nil {
		now = time.Now
	}
	return &Catcher{now: now}
}

// Send keeps m.
func (c *Catcher) Send(_ context.Context, m Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.caught) >= CatcherMax {
		c.caught = append(c.caught[:0], c.caught[len(c.caught)-CatcherMax+1:]...)
	}
	c.caught = append(c.caught, Caught{Message: m, At: c.now()})
	return nil
}

// Transport is "catcher".
func (*Catcher) Transport() string { return "catcher" }

// To is what the catcher took for an address (matched whatever its case),
// newest first, at most limit.
func (c *Catcher) To(address string, limit int) []Caught {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []Caught{}
	for i := len(c.caught) - 1; i >= 0 && len(out) < limit; i-- {
		if strings.EqualFold(c.caught[i].To, address) {
			out = append(out, c.caught[i])
		}
	}
	return out
}

// Security is how a connection to the SMTP server is protected.
type Security string

const (
	// StartTLS upgrades the connection with STARTTLS, or fails.
	StartTLS Security = "starttls"
	// ImplicitTLS speaks TLS from the first byte (smtps://).
	ImplicitTLS Security = "tls"
	// StartTLSIfOffered upgrades when the server offers STARTTLS, else
	// stays plain: loopback hosts only.
	StartTLSIfOffered Security = "starttls-if-offered"
	// NoTLS never upgrades (?tls=none).
	NoTLS Security = "none"
)

// Endpoint is a parsed SMTP_URL. It is never printed whole: String leaves
// the password out.
type Endpoint struct {
	Host     string
	Port     int
	Security Security
	Username string
	password string
}

// String describes the endpoint without its credentials.
func (e Endpoint) String() string {
	return fmt.Sprintf("%s (%s)", net.JoinHostPort(e.Host, strconv.Itoa(e.Port)), e.Security)
}

// GoString is String, so %#v does not show the password either.
func (e Endpoint) GoString() string { return e.String() }

// ParseURL reads an SMTP_URL (see the package doc). Its errors say what is
// wrong without quoting the URL, which may hold a password.
func ParseURL(raw string) (Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, errors.New("not a URL (smtp://user:pass@host:587 or smtps://user:pass@host:465)")
	}
	var e Endpoint
	switch u.Scheme {
	case "smtp":
		e.Security, e.Port = StartTLS, 587
	case "smtps":
		e.Security, e.Port = ImplicitTLS, 465
	default:
		return Endpoint{}, errors.New("the scheme must be smtp (STARTTLS) or smtps (implicit TLS)")
	}
	e.Host = u.Hostname()
	if e.Host == "" {
		return Endpoint{}, errors.New("no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Endpoint{}, errors.New("the port must be 1 to 65535")
		}
		e.Port = n
	}
	if u.Path != "" && u.Path != "/" {
		return Endpoint{}, errors.New("no path is allowed")
	}
	if u.User != nil {
		e.Username = u.User.Username()
		e.password, _ = u.User.Password()
	}
	q := u.Query()
	for k := range q {
		if k != "tls" {
			return Endpoint{}, fmt.Errorf("unknown parameter %q (only tls=none)", k)
		}
	}
	switch tlsParam := q.Get("tls"); {
	case q.Has("tls") && tlsParam != "none":
		return Endpoint{}, errors.New("tls may only be none")
	case tlsParam == "none" && e.Security == ImplicitTLS:
		return Endpoint{}, errors.New("smtps is TLS: tls=none contradicts it")
	case tlsParam == "none" && (e.Username != "" || e.password != ""):
		return Endpoint{}, errors.New("tls=none with a user or password would send them in clear")
	case tlsParam == "none":
		e.Security = NoTLS
	case e.Security == StartTLS && isLoopback(e.Host):
		e.Security = StartTLSIfOffered
	}
	return e, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Config configures the SMTP sender.
type Config struct {
	// URL is SMTP_URL.
	URL string
	// From is MAIL_FROM: an address, with or without a display name.
	From string
	// TLSConfig, when set, replaces the default (system roots, the URL's
	// host as server name): tests trust their server's certificate.
	TLSConfig *tls.Config
	// Timeout bounds connecting and each command; 0 is DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds an SMTP connection and each of its commands.
const DefaultTimeout = 20 * time.Second

// SMTP sends over SMTP, one connection per message (the outbox sends few,
// each from its own job).
type SMTP struct {
	endpoint Endpoint
	from     *mail.Address
	domain   string
	tls      *tls.Config
	timeout  time.Duration
	// dial, when set, replaces the dialer (tests reach a loopback server
	// under another host name).
	dial gomail.DialContextFunc
}

// NewSMTP checks cfg and builds the sender; it does not connect.
func NewSMTP(cfg Config) (*SMTP, error) {
	ep, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	from, err := ParseFrom(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("MAIL_FROM: %w", err)
	}
	tc := cfg.TLSConfig
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName = ep.Host
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &SMTP{endpoint: ep, from: from, domain: from.Address[strings.LastIndexByte(from.Address, '@')+1:], tls: tc, timeout: timeout}, nil
}

// ParseFrom reads MAIL_FROM: one address, with or without a display name.
func ParseFrom(s string) (*mail.Address, error) {
	a, err := mail.ParseAddress(s)
	if err != nil || !strings.Contains(a.Address, "@") {
		return nil, errors.New("must be an address such as \"agentpay <noreply@example.com>\"")
	}
	return a, nil
}

// Transport is "smtp".
func (*SMTP) Transport() string { return "smtp" }

// Endpoint is the server the sender talks to.
func (s *SMTP) Endpoint() Endpoint { return s.endpoint }

// SendError is why a message was not sent. Its text names the server and
// what failed, never the password.
type SendError struct {
	// Permanent: the receiving side refused this message for good.
	Permanent bool
	msg       string
}

func (e *SendError) Error() string { return e.msg }

// IsPermanent reports whether err is a refusal of the message for good.
func IsPermanent(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Permanent
}

// Send sends m: multipart/alternative with the text and HTML parts, or text
// only.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	msg, err := s.build(m)
	if err != nil {
		return &SendError{Permanent: true, msg: "mail: " + s.scrub(err.Error())}
	}
	opts := []gomail.Option{
		gomail.WithPort(s.endpoint.Port),
		gomail.WithTimeout(s.timeout),
		gomail.WithTLSConfig(s.tls),
	}
	switch s.endpoint.Security {
	case ImplicitTLS:
		opts = append(opts, gomail.WithSSL())
	case StartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case StartTLSIfOffered:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	case NoTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if s.endpoint.Username != "" || s.endpoint.password != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.endpoint.Username), gomail.WithPassword(s.endpoint.password))
	}
	if s.dial != nil {
		opts = append(opts, gomail.WithDialContextFunc(s.dial))
	}
	c, err := gomail.NewClient(s.endpoint.Host, opts...)
	if err != nil {
		return &SendError{msg: "smtp " + s.endpoint.String() + ": " + s.scrub(err.Error())}
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return &SendError{Permanent: permanent(err), msg: "smtp " + s.endpoint.String() + ": " + s.scrub(err.Error())}
	}
	return nil
}

// build makes the message; an error is a message no server will take (a bad
// address), so it is permanent.
func (s *SMTP) build(m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.FromFormat(s.from.Name, s.from.Address); err != nil {
		return nil, err
	}
	if err := msg.To(m.To); err != nil {
		return nil, err
	}
	msg.Subject(m.Subject)
	if m.ID != "" {
		msg.SetMessageIDWithValue(m.ID + "@" + s.domain)
	} else {
		msg.SetMessageID()
	}
	msg.SetDate()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// permanent: a 5xx reply to RCPT TO or DATA, the receiving side's refusal
// of this message. A 5xx elsewhere (MAIL FROM, authentication) is the
// sender's configuration, which an operator fixes: retried.
func permanent(err error) bool {
	var se *gomail.SendError
	if !errors.As(err, &se) || se.IsTemp() {
		return false
	}
	switch se.Reason {
	case gomail.ErrSMTPRcptTo, gomail.ErrSMTPData, gomail.ErrSMTPDataClose:
		return se.ErrorCode() >= 500 && se.ErrorCode() < 600
	}
	return false
}

// scrub removes the password from a library's or server's error text, in
// case either ever repeats it.
func (s *SMTP) scrub(text string) string {
	if p := s.endpoint.password; p != "" {
		text = strings.ReplaceAll(text, p, "[redacted]")
		text = strings.ReplaceAll(text, url.QueryEscape(p), "[redacted]")
	}
	return text
}
