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
	"agentpay/ent/mailmessage"
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
	require.Empty(t, row.Text, "a message refused for good keeps no bodies")
	require.Empty(t, row.HTML)

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

// The dev catcher: it keeps its own copy of what it is sent, which DevMail
// lists for an address (any case), newest first; the outbox row, marked
// sent, keeps no body, as with SMTP.
func TestDevMailListsCaughtMailNewestFirst(t *testing.T) {
	// A clock standing still: the order must not depend on created_at
	// differing.
	catcher := mail.NewCatcher(nil)
	svc := newMailService(t, catcher, testenv.Options{Clock: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)})
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
		row := mailRow(t, svc, id)
		require.Equal(t, "catcher", row.Transport)
		require.NotNil(t, row.SentAt)
		require.Empty(t, row.Text, "the outbox keeps no body once sent, under the catcher too")
		require.Empty(t, row.HTML)
	}

	got, err := svc.DevMail(context.Background(), " ANA@example.com ")
	require.NoError(t, err)
	var subjects []string
	for _, m := range got {
		subjects = append(subjects, m.Subject)
		require.NotEqual(t, unsent.ID.String(), m.ID, "only caught mail is listed")
		require.Equal(t, testMail.Text, m.Text, "the catcher keeps its copy")
		require.Equal(t, testMail.HTML, m.HTML)
		require.False(t, m.At.IsZero())
	}
	require.Equal(t, []string{"message D", "message C", "message A"}, subjects)

	none, err := svc.DevMail(context.Background(), "nobody@example.com")
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = svc.DevMail(context.Background(), "")
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)

	smtp := newMailService(t, smtpMailer(t, testenv.NewSMTPServer(t)), testenv.Options{})
	sent := mustQueue(t, smtp, testMail)
	require.NoError(t, smtp.SendMail(context.Background(), sent.ID))
	none, err = smtp.DevMail(context.Background(), testMail.To)
	require.NoError(t, err)
	require.Empty(t, none, "mail sent over SMTP is not listed")
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

// Sign-in and invitation links leave the outbox at each end of their
// message: sent, refused for good (a 5xx reply, or the job's last try
// failing: GiveUpMail), and their link expiring unsent (the sweep, and
// SendMail itself). Each case queues both kinds through the real flows.
func TestOutboxErasesLinks(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	type env struct {
		svc   *Service
		srv   *testenv.SMTPServer
		clock interface{ Advance(time.Duration) }
		// signIn and invite are the two messages, each with its link.
		signIn, invite *ent.MailMessage
	}
	setup := func(t *testing.T) *env {
		srv := testenv.NewSMTPServer(t)
		svc := newMailService(t, smtpMailer(t, srv), testenv.Options{Clock: start})
		require.NoError(t, svc.RequestSignIn(ctx, "ana@example.com", "192.0.2.1"))
		reg, err := svc.QuickRegister(ctx, randomName(t, "bot"))
		require.NoError(t, err)
		_, err = svc.InviteHuman(ctx, reg.Agent, "bea@example.com")
		require.NoError(t, err)
		e := &env{svc: svc, srv: srv, clock: svc.cfg.Clock.(interface{ Advance(time.Duration) })}
		for _, m := range []struct {
			to, link string
			row      **ent.MailMessage
		}{{"ana@example.com", "/signin/sil_", &e.signIn}, {"bea@example.com", "/invite/inv_", &e.invite}} {
			rows, err := svc.cfg.DB.Ent.MailMessage.Query().Where(mailmessage.To(m.to)).All(ctx)
			require.NoError(t, err)
			require.Len(t, rows, 1)
			require.Contains(t, rows[0].Text, m.link, "queued with its link")
			require.Contains(t, rows[0].HTML, m.link)
			require.NotNil(t, rows[0].ExpiresAt, "a link's mail knows when the link dies")
			*m.row = rows[0]
		}
		return e
	}
	requireErased := func(t *testing.T, e *env, msg *ent.MailMessage, sent bool) {
		t.Helper()
		row := mailRow(t, e.svc, msg.ID)
		require.Empty(t, row.Text, "no link left in the outbox")
		require.Empty(t, row.HTML)
		if sent {
			require.NotNil(t, row.SentAt)
		} else {
			require.Nil(t, row.SentAt)
			require.NotNil(t, row.FailedAt)
			require.NoError(t, e.svc.SendMail(ctx, msg.ID), "an ended message is left alone")
		}
	}

	t.Run("sent", func(t *testing.T) {
		e := setup(t)
		for _, m := range []*ent.MailMessage{e.signIn, e.invite} {
			require.NoError(t, e.svc.SendMail(ctx, m.ID))
			requireErased(t, e, m, true)
		}
		got := e.srv.Messages()
		require.Len(t, got, 2)
		require.Contains(t, got[0].Text+got[1].Text, "/signin/sil_", "the link went out in the mail")
	})
	t.Run("refused for good", func(t *testing.T) {
		e := setup(t)
		e.srv.RefuseRcpt(550)
		for _, m := range []*ent.MailMessage{e.signIn, e.invite} {
			require.NoError(t, e.svc.SendMail(ctx, m.ID))
			requireErased(t, e, m, false)
		}
	})
	t.Run("given up after the last try", func(t *testing.T) {
		e := setup(t)
		e.srv.Down()
		for _, m := range []*ent.MailMessage{e.signIn, e.invite} {
			err := e.svc.SendMail(ctx, m.ID)
			require.Error(t, err)
			require.Equal(t, m.Text, mailRow(t, e.svc, m.ID).Text, "kept while it may still go out")
			require.NoError(t, e.svc.GiveUpMail(ctx, m.ID, err))
			e.srv.Up()
			requireErased(t, e, m, false)
			require.Contains(t, mailRow(t, e.svc, m.ID).LastError, "given up")
			e.srv.Down()
		}
		require.Empty(t, e.srv.Messages())
		require.ErrorIs(t, e.svc.GiveUpMail(ctx, uuid.New(), nil), ErrNotFound)
	})
	t.Run("expired unsent, by the sweep", func(t *testing.T) {
		e := setup(t)
		n, err := e.svc.EraseExpiredMail(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing expired yet")
		e.clock.Advance(SignInLinkTTL)
		n, err = e.svc.EraseExpiredMail(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the sign-in link died first")
		requireErased(t, e, e.signIn, false)
		require.Equal(t, mailRow(t, e.svc, e.signIn.ID).LastError, mailExpiredError)
		require.Equal(t, e.invite.Text, mailRow(t, e.svc, e.invite.ID).Text, "the invitation's link still works")
		e.clock.Advance(InvitationTTL)
		n, err = e.svc.EraseExpiredMail(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		requireErased(t, e, e.invite, false)
		require.Empty(t, e.srv.Messages(), "a dead link is never mailed")
	})
	t.Run("expired unsent, at the try", func(t *testing.T) {
		e := setup(t)
		e.clock.Advance(InvitationTTL)
		for _, m := range []*ent.MailMessage{e.signIn, e.invite} {
			require.NoError(t, e.svc.SendMail(ctx, m.ID))
			requireErased(t, e, m, false)
		}
		require.Empty(t, e.srv.Messages(), "a dead link is never mailed")
	})
}
