package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/mail"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

var testMail = Mail{
	To:      "ana@example.com",
	Subject: "Your sign-in link",
	Text:    "Sign in: https://app.example/signin/tok123.\nIt works once.",
	HTML:    `<p><a href="https://app.example/signin/tok123">Sign in</a></p>`,
}

// newMailService is a service with an insert-only River client and mailer.
func newMailService(t *testing.T, mailer mail.Sender, opts testenv.Options) *Service {
	t.Helper()
	opts.Jobs = true
	return newTestService(t, testenv.New(t, opts), Config{Mailer: mailer})
}

// smtpMailer sends to srv.
func smtpMailer(t *testing.T, srv *testenv.SMTPServer) *mail.SMTP { return srv.Mailer(t) }

// queue runs queueMail in its own transaction; fail makes the transaction
// roll back after it.
func queue(t *testing.T, svc *Service, m Mail, fail bool) (*ent.MailMessage, error) {
	t.Helper()
	var msg *ent.MailMessage
	err := svc.cfg.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		if msg, err = svc.queueMail(ctx, tx, sqlTx, m); err != nil {
			return err
		}
		if fail {
			return errors.New("the change fails after queueing its mail")
		}
		return nil
	})
	return msg, err
}

func mustQueue(t *testing.T, svc *Service, m Mail) *ent.MailMessage {
	t.Helper()
	msg, err := queue(t, svc, m, false)
	require.NoError(t, err)
	return msg
}

func mailRow(t *testing.T, svc *Service, id uuid.UUID) *ent.MailMessage {
	t.Helper()
	m, err := svc.cfg.DB.Ent.MailMessage.Get(context.Background(), id)
	require.NoError(t, err)
	return m
}

func TestQueueMailCommitsWithItsJob(t *testing.T) {
	svc := newMailService(t, nil, testenv.Options{})
	msg := mustQueue(t, svc, testMail)
	require.Equal(t, uuid.Version(7), msg.ID.Version(), "ids sort in queueing order")

	row := mailRow(t, svc, msg.ID)
	require.Equal(t, testMail.To, row.To)
	require.Equal(t, testMail.Text, row.Text)
	require.Equal(t, testMail.HTML, row.HTML)
	require.Nil(t, row.SentAt)
	require.Equal(t, 1, testdb.CountRows(t, svc.cfg.DB, "river_job WHERE kind = 'send_mail' AND queue = 'mail'"))
}

func TestQueueMailRolledBackLeavesNothing(t *testing.T) {
	svc := newMailService(t, nil, testenv.Options{})
	_, err := queue(t, svc, testMail, true)
	require.Error(t, err)
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, "mail_messages"))
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, "river_job WHERE kind = 'send_mail'"))
}

func TestQueueMailRefusesWhatCannotBeOneMessage(t *testing.T) {
	svc := newMailService(t, nil, testenv.Options{})
	for _, tc := range []struct {
		name  string
		edit  func(*Mail)
		field string
	}{
		{"empty address", func(m *Mail) { m.To = "" }, "email"},
		{"not an address", func(m *Mail) { m.To = "ana" }, "email"},
		{"two addresses", func(m *Mail) { m.To = "ana@example.com, bob@example.com" }, "email"},
		{"display name", func(m *Mail) { m.To = "Ana <ana@example.com>" }, "email"},
		{"header injection in address", func(m *Mail) { m.To = "ana@example.com\r\nBcc: x@example.com" }, "email"},
		{"empty subject", func(m *Mail) { m.Subject = " " }, "subject"},
		{"header injection in subject", func(m *Mail) { m.Subject = "Hi\r\nBcc: x@example.com" }, "subject"},
		{"no text", func(m *Mail) { m.Text = "" }, "text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testMail
			tc.edit(&m)
			_, err := queue(t, svc, m, false)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.field, verr.Field)
		})
	}
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, "mail_messages"))
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, "river_job WHERE kind = 'send_mail'"))
}

// Sent over SMTP once: the row records it and drops the bodies, and a
// second run of the job sends nothing.
func TestSendMailOverSMTPOnce(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	svc := newMailService(t, smtpMailer(t, srv), testenv.Options{})
	msg := mustQueue(t, svc, testMail)

	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	got := srv.Messages()
	require.Len(t, got, 1)
	require.Equal(t, []string{"ana@example.com"}, got[0].To)
	require.Equal(t, testMail.Subject, got[0].Subject)
	require.Contains(t, got[0].Text, "https://app.example/signin/tok123")
	require.Equal(t, testMail.HTML, got[0].HTML)
	require.Equal(t, "<"+msg.ID.String()+"@agentpay.test>", got[0].Header.Get("Message-ID"))

	row := mailRow(t, svc, msg.ID)
	require.NotNil(t, row.SentAt)
	require.Equal(t, "smtp", row.Transport)
	require.Equal(t, 1, row.Attempts)
	require.Nil(t, row.LockedUntil)
	require.Empty(t, row.Text, "a sent message's bodies (sign-in links) are not kept")
	require.Empty(t, row.HTML)

	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	require.Len(t, srv.Messages(), 1, "a sent message is not sent again")
}

// The SMTP server down: the try fails with an error (River retries), the
// row says why without the password, and a later try sends it, once.
func TestSendMailRetriesWhileSMTPIsDown(t *testing.T) {
	srv := testenv.NewSMTPServerWith(t, testenv.SMTPOptions{TLS: "starttls", Username: "mailer", Password: "pa55-w0rd"})
	svc := newMailService(t, smtpMailer(t, srv), testenv.Options{})
	msg := mustQueue(t, svc, testMail)

	srv.Down()
	err := svc.SendMail(context.Background(), msg.ID)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "pa55-w0rd")
	row := mailRow(t, svc, msg.ID)
	require.Nil(t, row.SentAt)
	require.Nil(t, row.FailedAt)
	require.Nil(t, row.LockedUntil, "a failed try frees the message for the next")
	require.Equal(t, 1, row.Attempts)
	require.Contains(t, row.LastError, srv.Addr)
	require.NotContains(t, row.LastError, "pa55-w0rd")
	require.Equal(t, testMail.Text, row.Text, "an unsent message keeps its bodies")

	srv.RefuseMail(421) // up, but not taking mail yet
	srv.Up()
	require.Error(t, svc.SendMail(context.Background(), msg.ID))
	require.Empty(t, srv.Messages())

	srv.RefuseMail(0)
	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	require.Len(t, srv.Messages(), 1)
	row = mailRow(t, svc, msg.ID)
	require.NotNil(t, row.SentAt)
	require.Equal(t, 3, row.Attempts)
	require.Empty(t, row.LastError)
}

// Two runs of one message at once (two workers, or a job and its rescue):
// one sends, the other waits for it, and the message arrives once.
func TestSendMailRaceSendsOnce(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	svc := newMailService(t, smtpMailer(t, srv), testenv.Options{})
	msg := mustQueue(t, svc, testMail)
	srv.Delay(300 * time.Millisecond)

	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = svc.SendMail(context.Background(), msg.ID) })
	}
	wg.Wait()
	busy := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, errMailBusy)
			busy++
		}
	}
	require.Len(t, srv.Messages(), 1)
	require.Positive(t, busy, "the runs overlapped: the others found the message claimed")
	// The runs that found it busy come back later and find it sent.
	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	require.Len(t, srv.Messages(), 1)
	require.Equal(t, 1, mailRow(t, svc, msg.ID).Attempts)
}

// A claim whose try died (its process killed mid-send) is taken over once
// it has expired, not before.
func TestSendMailTakesOverAnExpiredClaim(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	svc := newMailService(t, smtpMailer(t, srv), testenv.Options{Clock: start})
	msg := mustQueue(t, svc, testMail)
	_, err := svc.cfg.DB.Ent.MailMessage.UpdateOneID(msg.ID).AddAttempts(1).SetLockedUntil(start.Add(mailClaimTTL)).Save(context.Background())
	require.NoError(t, err)

	require.ErrorIs(t, svc.SendMail(context.Background(), msg.ID), errMailBusy)
	require.Empty(t, srv.Messages())

	svc.cfg.Clock.(interface{ Advance(time.Duration) }).Advance(mailClaimTTL + time.Second)
	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	require.Len(t, srv.Messages(), 1)
	require.Equal(t, 2, mailRow(t, svc, msg.ID).Attempts)
}

// A 5xx to RCPT TO is a refusal for good: recorded, the job ends, never
// tried again.
func TestSendMailRefusedForGood(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	svc := newMailService(t, smtpMailer(t, srv), testenv.Options{})
	msg := mustQueue(t, svc, testMail)
	srv.RefuseRcpt(550)
	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	row := mailRow(t, svc, msg.ID)
	require.NotNil(t, row.FailedAt)
	require.Nil(t, row.SentAt)
	require.Contains(t, row.LastError, "550")

	srv.RefuseRcpt(0)
	require.NoError(t, svc.SendMail(context.Background(), msg.ID))
	require.Empty(t, srv.Messages())
	require.Equal(t, 1, mailRow(t, svc, msg.ID).Attempts)
}

// Without a mailer (serve or worker without SMTP_URL) mail stays in the
// outbox and the job is retried.
func TestSendMailWithoutMailerKeepsItQueued(t *testing.T) {
	svc := newMailService(t, nil, testenv.Options{})
	msg := mustQueue(t, svc, testMail)
	require.ErrorIs(t, svc.SendMail(context.Background(), msg.ID), ErrNoMailer)
	row := mailRow(t, svc, msg.ID)
	require.Nil(t, row.SentAt)
	require.Equal(t, 0, row.Attempts)

	require.ErrorIs(t, svc.SendMail(context.Background(), uuid.New()), ErrNotFound)
}

// The dev catcher: marking the row sent is the sending; DevMail lists what
// it caught for an address (any case), newest first, bodies kept.
func TestDevMailListsCaughtMailNewestFirst(t *testing.T) {
	// A clock standing still: the order must not depend on created_at
	// differing.
	svc := newMailService(t, mail.Catcher{}, testenv.Options{Clock: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)})
	var ids []uuid.UUID
	for i, to := range []string{"ana@example.com", "bob@example.com", "Ana@Example.com", "ana@example.com"} {
		m := testMail
		m.To, m.Subject = to, "message "+string(rune('A'+i))
		msg := mustQueue(t, svc, m)
		ids = append(ids, msg.ID)
	}
	unsent := mustQueue(t, svc, testMail)
	for _, id := range ids {
		require.NoError(t, svc.SendMail(context.Background(), id))
	}

	got, err := svc.DevMail(context.Background(), " ANA@example.com ")
	require.NoError(t, err)
	var subjects []string
	for _, m := range got {
		subjects = append(subjects, m.Subject)
		require.NotEqual(t, unsent.ID, m.ID, "only caught mail is listed")
		require.Equal(t, "catcher", m.Transport)
		require.Equal(t, testMail.Text, m.Text, "the catcher keeps the bodies")
		require.NotNil(t, m.SentAt)
	}
	require.Equal(t, []string{"message D", "message C", "message A"}, subjects)

	none, err := svc.DevMail(context.Background(), "nobody@example.com")
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = svc.DevMail(context.Background(), "")
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
}

func TestMailLinks(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"no links here", []string{}},
		{"Sign in: https://app.example/signin/tok123.\nIt works once.", []string{"https://app.example/signin/tok123"}},
		{"Open http://127.0.0.1:8080/app/invite/AbC?x=1&y=2, then come back", []string{"http://127.0.0.1:8080/app/invite/AbC?x=1&y=2"}},
		{"(see https://a.example/x) and <https://b.example/y> or \"https://c.example/z\"", []string{"https://a.example/x", "https://b.example/y", "https://c.example/z"}},
		{"twice https://a.example/x https://a.example/x!", []string{"https://a.example/x"}},
		{"ftp://a.example/x mailto:a@b.example", []string{}},
	} {
		require.Equal(t, tc.want, MailLinks(tc.text), tc.text)
	}
	require.Equal(t, []string{"https://app.example/signin/tok123"}, MailLinks(strings.Repeat(testMail.Text, 2)))
}
