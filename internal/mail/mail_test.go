package mail_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/internal/mail"
	"agentpay/internal/testenv"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		host     string
		port     int
		security mail.Security
		user     string
		err      string
	}{
		{url: "smtp://user:pass@mail.example.com:587", host: "mail.example.com", port: 587, security: mail.StartTLS, user: "user"},
		{url: "smtp://mail.example.com", host: "mail.example.com", port: 587, security: mail.StartTLS},
		{url: "smtp://mail.example.com:25", host: "mail.example.com", port: 25, security: mail.StartTLS},
		{url: "smtps://user:pass@mail.example.com", host: "mail.example.com", port: 465, security: mail.ImplicitTLS, user: "user"},
		{url: "smtps://mail.example.com:2465", host: "mail.example.com", port: 2465, security: mail.ImplicitTLS},
		{url: "smtp://127.0.0.1:1025", host: "127.0.0.1", port: 1025, security: mail.StartTLSIfOffered},
		{url: "smtp://localhost:1025", host: "localhost", port: 1025, security: mail.StartTLSIfOffered},
		{url: "smtp://[::1]:1025", host: "::1", port: 1025, security: mail.StartTLSIfOffered},
		{url: "smtp://relay.internal:25?tls=none", host: "relay.internal", port: 25, security: mail.NoTLS},
		{url: "smtp://us%40er:p%3Ass@mail.example.com", host: "mail.example.com", port: 587, security: mail.StartTLS, user: "us@er"},
		{url: "http://mail.example.com", err: "scheme"},
		{url: "mail.example.com:587", err: "scheme"},
		{url: "smtp://", err: "no host"},
		{url: "smtp://mail.example.com:0", err: "port"},
		{url: "smtp://mail.example.com:99999", err: "port"},
		{url: "smtp://mail.example.com/x", err: "path"},
		{url: "smtp://mail.example.com?tls=yes", err: "tls may only be none"},
		{url: "smtp://mail.example.com?auth=plain", err: "unknown parameter"},
		{url: "smtps://mail.example.com?tls=none", err: "contradicts"},
		{url: "smtp://user:secret@relay.internal?tls=none", err: "in clear"},
		{url: "smtp://user:secret@127.0.0.1?tls=none", err: "in clear"},
		{url: "smtp://user:s%ZZecret@mail.example.com", err: "not a URL"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			e, err := mail.ParseURL(tc.url)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "secret", "the error must not quote the URL")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.host, e.Host)
			require.Equal(t, tc.port, e.Port)
			require.Equal(t, tc.security, e.Security)
			require.Equal(t, tc.user, e.Username)
			require.NotContains(t, e.String()+fmt.Sprintf("%v %+v %#v", e, e, e), "pass", "the endpoint never prints its password")
		})
	}
}

func TestParseFrom(t *testing.T) {
	for _, ok := range []string{"noreply@example.com", "agentpay <noreply@example.com>", `"Agent Pay" <a@b.example>`} {
		_, err := mail.ParseFrom(ok)
		require.NoError(t, err, ok)
	}
	for _, bad := range []string{"", "noreply", "a@b, c@d", "<>"} {
		_, err := mail.ParseFrom(bad)
		require.Error(t, err, bad)
	}
}

func newSender(t *testing.T, url string, srv *testenv.SMTPServer) *mail.SMTP {
	t.Helper()
	s, err := mail.NewSMTP(mail.Config{URL: url, From: "Agent Pay <noreply@agentpay.test>", TLSConfig: srv.ClientTLS, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return s
}

var testMessage = mail.Message{
	ID:      "0190f1d2-0000-7000-8000-000000000001",
	To:      "ana@example.com",
	Subject: "Sign in to agentpay — your link",
	Text:    "Open https://app.example/signin/abc to sign in.\nLine two.",
	HTML:    `<p>Open <a href="https://app.example/signin/abc">this link</a> to sign in.</p>`,
}

// What a sender puts on the wire: envelope, headers, a text and an HTML
// part, over each kind of connection SMTP_URL allows.
func TestSMTPSendsMultipartOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    testenv.SMTPOptions
		wantTLS bool
	}{
		{name: "loopback plain", opts: testenv.SMTPOptions{}},
		{name: "starttls with auth", opts: testenv.SMTPOptions{TLS: "starttls", Username: "mailer", Password: "s3cret"}, wantTLS: true},
		{name: "implicit tls with auth", opts: testenv.SMTPOptions{TLS: "implicit", Username: "mailer", Password: "s3cret"}, wantTLS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testenv.NewSMTPServerWith(t, tc.opts)
			s := newSender(t, srv.URL, srv)
			require.NoError(t, s.Send(context.Background(), testMessage))

			got := srv.Messages()
			require.Len(t, got, 1)
			m := got[0]
			require.Equal(t, "noreply@agentpay.test", m.From)
			require.Equal(t, []string{"ana@example.com"}, m.To)
			require.Equal(t, tc.wantTLS, m.TLS)
			require.Equal(t, tc.opts.Username, m.AuthUser)
			require.Equal(t, `"Agent Pay" <noreply@agentpay.test>`, m.Header.Get("From"))
			require.Equal(t, "<ana@example.com>", m.Header.Get("To"))
			require.Equal(t, testMessage.Subject, m.Subject)
			require.Equal(t, "<"+testMessage.ID+"@agentpay.test>", m.Header.Get("Message-ID"))
			require.NotEmpty(t, m.Header.Get("Date"))
			require.True(t, strings.HasPrefix(m.Header.Get("Content-Type"), "multipart/alternative;"), m.Header.Get("Content-Type"))
			require.Equal(t, strings.ReplaceAll(testMessage.Text, "\n", "\r\n"), m.Text)
			require.Equal(t, testMessage.HTML, m.HTML)
		})
	}
}

func TestSMTPSendsTextOnlyWithoutHTML(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	msg := testMessage
	msg.HTML = ""
	require.NoError(t, newSender(t, srv.URL, srv).Send(context.Background(), msg))
	m := srv.Messages()[0]
	require.True(t, strings.HasPrefix(m.Header.Get("Content-Type"), "text/plain"), m.Header.Get("Content-Type"))
	require.Empty(t, m.HTML)
	require.Contains(t, m.Text, "https://app.example/signin/abc")
}

// smtp:// to a host that is not loopback insists on STARTTLS: a server
// that does not offer it gets nothing (the password would travel in
// clear).
func TestSMTPStartTLSIsMandatoryOffLoopback(t *testing.T) {
	srv := testenv.NewSMTPServerWith(t, testenv.SMTPOptions{Username: "mailer", Password: "s3cret"})
	s := newSender(t, "smtp://mailer:s3cret@mail.example.test:587", srv)
	mail.SetDial(s, func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Addr)
	})
	err := s.Send(context.Background(), testMessage)
	require.Error(t, err)
	require.False(t, mail.IsPermanent(err))
	require.Contains(t, err.Error(), "STARTTLS")
	require.Empty(t, srv.Messages())
}

// Errors say which server and what failed, never the password, and tell
// a refusal for good (5xx at RCPT TO) from what may pass.
func TestSMTPErrors(t *testing.T) {
	srv := testenv.NewSMTPServerWith(t, testenv.SMTPOptions{TLS: "starttls", Username: "mailer", Password: "s3cret"})

	t.Run("wrong password", func(t *testing.T) {
		u := strings.Replace(srv.URL, "s3cret", "wr0ng-pa55", 1)
		err := newSender(t, u, srv).Send(context.Background(), testMessage)
		require.Error(t, err)
		require.False(t, mail.IsPermanent(err))
		require.NotContains(t, err.Error(), "wr0ng-pa55")
		require.Contains(t, err.Error(), srv.Addr)
	})
	t.Run("server down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		err = newSender(t, "smtp://mailer:s3cret@"+addr, srv).Send(context.Background(), testMessage)
		require.Error(t, err)
		require.False(t, mail.IsPermanent(err))
		require.NotContains(t, err.Error(), "s3cret")
	})
	t.Run("4xx at MAIL FROM", func(t *testing.T) {
		srv.RefuseMail(451)
		defer srv.RefuseMail(0)
		err := newSender(t, srv.URL, srv).Send(context.Background(), testMessage)
		require.Error(t, err)
		require.False(t, mail.IsPermanent(err))
	})
	t.Run("4xx at RCPT TO", func(t *testing.T) {
		srv.RefuseRcpt(450)
		defer srv.RefuseRcpt(0)
		err := newSender(t, srv.URL, srv).Send(context.Background(), testMessage)
		require.Error(t, err)
		require.False(t, mail.IsPermanent(err))
	})
	t.Run("5xx at RCPT TO", func(t *testing.T) {
		srv.RefuseRcpt(550)
		defer srv.RefuseRcpt(0)
		err := newSender(t, srv.URL, srv).Send(context.Background(), testMessage)
		require.Error(t, err)
		require.True(t, mail.IsPermanent(err), err.Error())
		require.NotContains(t, err.Error(), "s3cret")
	})
	require.Empty(t, srv.Messages())
}

func TestNewSMTPRefusesBadConfig(t *testing.T) {
	_, err := mail.NewSMTP(mail.Config{URL: "smtp://u:topsecret@h?tls=none", From: "a@b.example"})
	require.ErrorContains(t, err, "SMTP_URL")
	require.NotContains(t, err.Error(), "topsecret")
	_, err = mail.NewSMTP(mail.Config{URL: "smtp://h", From: "nobody"})
	require.ErrorContains(t, err, "MAIL_FROM")
}

// The dev catcher keeps its own copy of what it takes, newest first per
// address (any case), at most CatcherMax messages in all.
func TestCatcherKeepsTheNewest(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	c := mail.NewCatcher(func() time.Time { at = at.Add(time.Second); return at })
	require.Equal(t, "catcher", c.Transport())
	for i := range mail.CatcherMax + 5 {
		to := "bob@example.com"
		if i%2 == 0 {
			to = "Ana@Example.com"
		}
		require.NoError(t, c.Send(context.Background(), mail.Message{ID: fmt.Sprint(i), To: to, Subject: "s", Text: "t"}))
	}
	got := c.To("ana@example.com", 3)
	require.Len(t, got, 3)
	require.Equal(t, []string{fmt.Sprint(mail.CatcherMax + 4), fmt.Sprint(mail.CatcherMax + 2), fmt.Sprint(mail.CatcherMax)},
		[]string{got[0].ID, got[1].ID, got[2].ID}, "newest first")
	require.True(t, got[0].At.After(got[1].At))
	all := len(c.To("ana@example.com", 2*mail.CatcherMax)) + len(c.To("bob@example.com", 2*mail.CatcherMax))
	require.Equal(t, mail.CatcherMax, all, "the oldest go")
	require.Empty(t, c.To("nobody@example.com", 10))
}
