package testenv

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"agentpay/internal/mail"
)

// SMTPOptions configure NewSMTPServerWith. The zero value is NewSMTPServer:
// plain SMTP on loopback, no STARTTLS, no authentication.
type SMTPOptions struct {
	// TLS is "" (none), "starttls" (offered on the plain port) or
	// "implicit" (TLS from the first byte: an smtps:// URL). The server's
	// certificate is self-signed for 127.0.0.1 and localhost;
	// SMTPServer.ClientTLS trusts it.
	TLS string
	// Username and Password, when set, are required (AUTH PLAIN, offered
	// only over TLS unless TLS is ""), and are in SMTPServer.URL.
	Username, Password string
}

// SMTPServer is a real SMTP server on loopback (emersion/go-smtp) that
// keeps every message it accepts: what a sender put on the wire, to check
// headers and parts, and to follow the links a message carries. It stops
// when the test ends.
type SMTPServer struct {
	// URL is the server as an SMTP_URL, credentials included.
	URL string
	// Addr is its host:port.
	Addr string
	// ClientTLS trusts the server's certificate (the sender's
	// internal/mail Config.TLSConfig); nil without TLS.
	ClientTLS *tls.Config

	tb   testing.TB
	opts SMTPOptions
	tls  *tls.Config

	mu  sync.Mutex
	srv *smtp.Server
	// ln is srv's listener, closed by Down itself: srv.Close misses a
	// listener its Serve goroutine has not registered yet (Up then Down at
	// once left the server accepting).
	ln       net.Listener
	got      []SMTPMessage
	mailCode int
	rcptCode int
	delay    time.Duration
	arrived  chan struct{}
}

// SMTPMessage is one message the server accepted.
type SMTPMessage struct {
	// From and To are the envelope (MAIL FROM, RCPT TO).
	From string
	To   []string
	// TLS: the message came over TLS; AuthUser is who authenticated.
	TLS      bool
	AuthUser string
	// Data is the message as received; Header its parsed header.
	Data   []byte
	Header netmail.Header
	// Subject is the decoded Subject header; Text and HTML the decoded
	// text/plain and text/html parts (empty when absent).
	Subject    string
	Text, HTML string
}

// TestMailFrom is the MAIL_FROM of Mailer: messages' Message-IDs end in
// @agentpay.test.
const TestMailFrom = "agentpay <noreply@agentpay.test>"

// Mailer is a sender to this server as `agentpay worker` builds one from
// SMTP_URL (internal/mail), trusting its certificate: a service's
// Config.Mailer.
func (s *SMTPServer) Mailer(tb testing.TB) *mail.SMTP {
	tb.Helper()
	m, err := mail.NewSMTP(mail.Config{URL: s.URL, From: TestMailFrom, TLSConfig: s.ClientTLS, Timeout: 5 * time.Second})
	if err != nil {
		tb.Fatalf("testenv: smtp mailer: %v", err)
	}
	return m
}

// NewSMTPServer starts a plain SMTP server on loopback.
func NewSMTPServer(tb testing.TB) *SMTPServer {
	tb.Helper()
	return NewSMTPServerWith(tb, SMTPOptions{})
}

// NewSMTPServerWith starts an SMTP server with opts.
func NewSMTPServerWith(tb testing.TB, opts SMTPOptions) *SMTPServer {
	tb.Helper()
	s := &SMTPServer{tb: tb, opts: opts, arrived: make(chan struct{}, 1)}
	scheme := "smtp"
	switch opts.TLS {
	case "":
	case "starttls", "implicit":
		s.tls, s.ClientTLS = selfSignedTLS(tb)
		if opts.TLS == "implicit" {
			scheme = "smtps"
		}
	default:
		tb.Fatalf("testenv: SMTPOptions.TLS %q: want \"\", \"starttls\" or \"implicit\"", opts.TLS)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testenv: smtp listen: %v", err)
	}
	s.Addr = ln.Addr().String()
	u := url.URL{Scheme: scheme, Host: s.Addr}
	if opts.Username != "" || opts.Password != "" {
		u.User = url.UserPassword(opts.Username, opts.Password)
	}
	s.URL = u.String()
	s.serve(ln)
	tb.Cleanup(func() { s.Down() })
	return s
}

func (s *SMTPServer) serve(ln net.Listener) {
	srv := smtp.NewServer(&smtpBackend{s: s})
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.MaxMessageBytes = 10 << 20
	srv.AllowInsecureAuth = s.opts.TLS == ""
	switch s.opts.TLS {
	case "starttls":
		srv.TLSConfig = s.tls
	case "implicit":
		ln = tls.NewListener(ln, s.tls)
	}
	s.mu.Lock()
	s.srv, s.ln = srv, ln
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Down stops the server: connections are refused until Up.
func (s *SMTPServer) Down() {
	s.mu.Lock()
	srv, ln := s.srv, s.ln
	s.srv, s.ln = nil, nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		_ = ln.Close()
	}
}

// Up starts the server again on the same address after Down.
func (s *SMTPServer) Up() {
	s.tb.Helper()
	s.mu.Lock()
	running := s.srv != nil
	s.mu.Unlock()
	if running {
		return
	}
	var ln net.Listener
	var err error
	for range 50 { // the port may linger a moment after Down
		if ln, err = net.Listen("tcp", s.Addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.tb.Fatalf("testenv: smtp listen again on %s: %v", s.Addr, err)
	}
	s.serve(ln)
}

// RefuseMail makes the server reply code (4xx: try later, 5xx: refused) to
// MAIL FROM from now on; 0 accepts again.
func (s *SMTPServer) RefuseMail(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mailCode = code
}

// RefuseRcpt makes the server reply code to RCPT TO from now on; 0 accepts
// again.
func (s *SMTPServer) RefuseRcpt(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rcptCode = code
}

// Delay makes the server wait d before accepting each message's data, so a
// test can act while a send is in flight.
func (s *SMTPServer) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Messages returns every accepted message, in arrival order.
func (s *SMTPServer) Messages() []SMTPMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SMTPMessage(nil), s.got...)
}

// MessagesTo returns the accepted messages whose envelope has to.
func (s *SMTPServer) MessagesTo(to string) []SMTPMessage {
	var out []SMTPMessage
	for _, m := range s.Messages() {
		for _, r := range m.To {
			if strings.EqualFold(r, to) {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// WaitMessages waits until the server has accepted at least n messages and
// returns them all; the test fails after timeout.
func (s *SMTPServer) WaitMessages(tb testing.TB, n int, timeout time.Duration) []SMTPMessage {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		if got := s.Messages(); len(got) >= n {
			return got
		}
		select {
		case <-s.arrived:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			tb.Fatalf("testenv: smtp: %d messages after %s, want %d", len(s.Messages()), timeout, n)
			return nil
		}
	}
}

type smtpBackend struct{ s *SMTPServer }

func (b *smtpBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	return &smtpSession{s: b.s, tls: isTLS || b.s.opts.TLS == "implicit", conn: c}, nil
}

type smtpSession struct {
	s        *SMTPServer
	conn     *smtp.Conn
	tls      bool
	authUser string
	from     string
	to       []string
}

func (ss *smtpSession) needsAuth() bool {
	return (ss.s.opts.Username != "" || ss.s.opts.Password != "") && ss.authUser == ""
}

func (ss *smtpSession) AuthMechanisms() []string {
	if ss.s.opts.Username == "" && ss.s.opts.Password == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *smtpSession) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != ss.s.opts.Username || pass != ss.s.opts.Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "authentication failed"}
		}
		ss.authUser = user
		return nil
	}), nil
}

func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.needsAuth() {
		return smtp.ErrAuthRequired
	}
	ss.s.mu.Lock()
	code := ss.s.mailCode
	ss.s.mu.Unlock()
	if code != 0 {
		return refusal(code)
	}
	ss.from = from
	return nil
}

func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.mu.Lock()
	code := ss.s.rcptCode
	ss.s.mu.Unlock()
	if code != 0 {
		return refusal(code)
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	delay := ss.s.delay
	ss.s.mu.Unlock()
	time.Sleep(delay)
	if _, ok := ss.conn.TLSConnectionState(); ok {
		ss.tls = true
	}
	m := SMTPMessage{From: ss.from, To: append([]string(nil), ss.to...), TLS: ss.tls, AuthUser: ss.authUser, Data: data}
	if err := parseSMTPMessage(&m); err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "unparsable message: " + err.Error()}
	}
	ss.s.mu.Lock()
	ss.s.got = append(ss.s.got, m)
	ss.s.mu.Unlock()
	select {
	case ss.s.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (ss *smtpSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *smtpSession) Logout() error { return nil }

func refusal(code int) error {
	class := code / 100
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCode{class, 0, 0}, Message: fmt.Sprintf("refused (%d) by the test", code)}
}

// parseSMTPMessage fills the header, subject and decoded parts in.
func parseSMTPMessage(m *SMTPMessage) error {
	msg, err := netmail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return err
	}
	m.Header = msg.Header
	dec := new(mime.WordDecoder)
	if m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return err
	}
	return readPart(m, msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body)
}

func readPart(m *SMTPMessage, contentType, encoding string, body io.Reader) error {
	if contentType == "" {
		contentType = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return err
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextPart() // decodes quoted-printable itself
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := readPart(m, p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p); err != nil {
				return err
			}
		}
	}
	if strings.EqualFold(encoding, "base64") {
		body = base64.NewDecoder(base64.StdEncoding, body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	switch mt {
	case "text/plain":
		m.Text = string(b)
	case "text/html":
		m.HTML = string(b)
	}
	return nil
}

// selfSignedTLS makes the server's certificate (127.0.0.1, ::1, localhost)
// and a client config that trusts it.
func selfSignedTLS(tb testing.TB) (server, client *tls.Config) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testenv: smtp key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testenv smtp"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testenv: smtp certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testenv: smtp certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client
}
