package worker

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/jobs"
	"agentpay/internal/testenv"
)

// newMailHarness is a service sending to srv, with an insert-only River
// client the test queues with.
func newMailHarness(t *testing.T, srv *testenv.SMTPServer) *harness {
	t.Helper()
	return newHarness(t, testenv.New(t, testenv.Options{Jobs: true}), agentpay.Config{Mailer: srv.Mailer(t)})
}

// queueTestMail writes an outbox row and its send_mail job in one
// transaction, as the service's queueMail does.
func queueTestMail(t *testing.T, h *harness, to string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, h.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if _, err := tx.MailMessage.Create().SetID(id).SetTo(to).SetSubject("Hello").
			SetText("Open https://app.example/x").SetHTML("<p>hi</p>").Save(ctx); err != nil {
			return err
		}
		_, err := h.env.Jobs.InsertTx(ctx, sqlTx, jobs.SendMailArgs{MessageID: id}, nil)
		return err
	}))
	return id
}

// The send_mail job, run by the real worker: with the SMTP server down its
// first try fails and River retries it; once the server is back the message
// arrives, once.
func TestSendMailJobRetriesUntilSMTPIsBack(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	h := newMailHarness(t, srv)
	srv.Down()
	id := queueTestMail(t, h, "ana@example.com")
	h.runWorker(t)

	require.Eventually(t, func() bool {
		m, err := h.db.Ent.MailMessage.Get(context.Background(), id)
		require.NoError(t, err)
		return m.Attempts == 1 && m.LastError != "" && m.LockedUntil == nil
	}, 20*time.Second, 20*time.Millisecond, "the first try fails")
	srv.Up()

	got := srv.WaitMessages(t, 1, 30*time.Second)
	require.Equal(t, []string{"ana@example.com"}, got[0].To)
	require.Equal(t, "<"+id.String()+"@agentpay.test>", got[0].Header.Get("Message-ID"))
	require.Eventually(t, func() bool {
		m, err := h.db.Ent.MailMessage.Get(context.Background(), id)
		require.NoError(t, err)
		return m.SentAt != nil
	}, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		var state string
		require.NoError(t, h.db.SQL.QueryRowContext(context.Background(),
			"SELECT state FROM river_job WHERE kind = 'send_mail'").Scan(&state))
		return state == "completed"
	}, 10*time.Second, 20*time.Millisecond, "the job completes")
	time.Sleep(200 * time.Millisecond)
	require.Len(t, srv.Messages(), 1)
}

// Two jobs for one message (a job inserted twice, or run by two workers):
// the message arrives once.
func TestSendMailJobsForOneMessageSendOnce(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	srv.Delay(200 * time.Millisecond)
	h := newMailHarness(t, srv)
	id := queueTestMail(t, h, "ana@example.com")
	require.NoError(t, h.db.WithTx(context.Background(), func(ctx context.Context, _ *ent.Tx, sqlTx *sql.Tx) error {
		_, err := h.env.Jobs.InsertTx(ctx, sqlTx, jobs.SendMailArgs{MessageID: id}, nil)
		return err
	}))
	h.runWorker(t)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, h.db.SQL.QueryRowContext(context.Background(),
			"SELECT count(*) FROM river_job WHERE kind = 'send_mail' AND state = 'completed'").Scan(&n))
		return n == 2
	}, 60*time.Second, 50*time.Millisecond, "both jobs end")
	require.Len(t, srv.Messages(), 1)
}

// The send_mail job's last try failing gives the message up: River will
// not run it again, so the row is marked failed and its bodies (a link
// that could still work) are erased.
func TestSendMailJobGivesUpOnItsLastTry(t *testing.T) {
	srv := testenv.NewSMTPServer(t)
	h := newMailHarness(t, srv)
	srv.Down()
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, h.db.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if _, err := tx.MailMessage.Create().SetID(id).SetTo("ana@example.com").SetSubject("Sign in").
			SetText("https://app.example/signin/sil_x").SetHTML("<p>x</p>").Save(ctx); err != nil {
			return err
		}
		_, err := h.env.Jobs.InsertTx(ctx, sqlTx, jobs.SendMailArgs{MessageID: id}, &river.InsertOpts{MaxAttempts: 1})
		return err
	}))
	h.runWorker(t)
	require.Eventually(t, func() bool {
		m, err := h.db.Ent.MailMessage.Get(context.Background(), id)
		require.NoError(t, err)
		return m.FailedAt != nil
	}, 20*time.Second, 20*time.Millisecond, "given up after the last try")
	m, err := h.db.Ent.MailMessage.Get(context.Background(), id)
	require.NoError(t, err)
	require.Empty(t, m.Text)
	require.Empty(t, m.HTML)
	require.Nil(t, m.SentAt)
	require.Contains(t, m.LastError, "given up")
}

// erase_expired_mail, run by the worker at start and every minute, ends a
// message whose link expired unsent, even one whose send_mail job is gone.
func TestEraseExpiredMailJob(t *testing.T) {
	h := newMailHarness(t, testenv.NewSMTPServer(t))
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7())
	_, err := h.db.Ent.MailMessage.Create().SetID(id).SetTo("ana@example.com").SetSubject("Sign in").
		SetText("https://app.example/signin/sil_x").SetHTML("").SetExpiresAt(time.Now().Add(-time.Second)).Save(ctx)
	require.NoError(t, err)
	h.runWorker(t)
	require.Eventually(t, func() bool {
		m, err := h.db.Ent.MailMessage.Get(ctx, id)
		require.NoError(t, err)
		return m.FailedAt != nil && m.Text == ""
	}, 20*time.Second, 20*time.Millisecond)
}
