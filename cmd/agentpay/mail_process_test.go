package main

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/jobs"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// A message queued while no worker has SMTP_URL stays in the outbox (the
// worker warns, its job fails and is retried); a worker started with
// SMTP_URL then sends it, once, on the wire.
func TestProcessWorkerSendsQueuedMailOnceSMTPIsSet(t *testing.T) {
	e := newProcEnv(t)
	smtpSrv := testenv.NewSMTPServer(t)

	ctx := context.Background()
	db, err := store.OpenDB(ctx, store.DBConfig{URL: e.dbURL})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	inserter := testdb.InsertOnlyRiver(t, db)
	id := uuid.Must(uuid.NewV7())
	require.NoError(t, db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if _, err := tx.MailMessage.Create().SetID(id).SetTo("ana@example.com").SetSubject("Hello Ana").
			SetText("Open http://127.0.0.1:8080/app/x").SetHTML("<p>Hello</p>").Save(ctx); err != nil {
			return err
		}
		_, err := inserter.InsertTx(ctx, sqlTx, jobs.SendMailArgs{MessageID: id}, nil)
		return err
	}))

	w1 := e.Worker("worker-without-smtp")
	waitFor(t, processTestTimeout, func() bool {
		var errs string
		require.NoError(t, db.SQL.QueryRowContext(ctx,
			`SELECT coalesce(array_to_string(errors, ' | '), '') FROM river_job WHERE kind = 'send_mail'`).Scan(&errs))
		return strings.Contains(errs, "SMTP_URL is not set")
	}, "the send_mail job fails without SMTP_URL")
	require.Contains(t, w1.output(), "SMTP_URL is not set", "the worker warns at start")
	w1.kill()
	require.Empty(t, smtpSrv.Messages())

	base := e.env
	e.env = append(append([]string(nil), base...), "SMTP_URL="+smtpSrv.URL, "MAIL_FROM=agentpay <noreply@agentpay.test>")
	w2 := e.Worker("worker-with-smtp")
	e.env = base

	got := smtpSrv.WaitMessages(t, 1, processTestTimeout)
	require.Equal(t, []string{"ana@example.com"}, got[0].To)
	require.Equal(t, "Hello Ana", got[0].Subject)
	require.Equal(t, "<p>Hello</p>", got[0].HTML)
	waitFor(t, processTestTimeout, func() bool {
		m, err := db.Ent.MailMessage.Get(ctx, id)
		require.NoError(t, err)
		return m.SentAt != nil
	}, "the outbox records the message sent")
	time.Sleep(time.Second)
	require.Len(t, smtpSrv.Messages(), 1)
	require.NotContains(t, w2.output(), "SMTP_URL is not set")
}

// TestProcessInvitationAcrossProcesses: two serve processes and a worker
// on one PostgreSQL database, as in production. An agent subscribed to its
// events on the first serve invites an address through the second; the
// worker, not the serve process, sends the invitation over SMTP; the
// person accepts it through the second serve's app; the agent's
// subscription on the first serve is told, though nothing but the
// database connects the two serve processes.
func TestProcessInvitationAcrossProcesses(t *testing.T) {
	e := newProcEnv(t)
	smtpSrv := testenv.NewSMTPServer(t)
	e.env = append(e.env, "SMTP_URL="+smtpSrv.URL, "MAIL_FROM=agentpay <noreply@agentpay.test>")
	_, api1 := e.Serve("serve-1")
	_, api2 := e.Serve("serve-2")

	agent := registerTestAgent(t, api1, "ana_agent")
	events := subscribeAgentEvents(t, api1, agent.key)
	require.Equal(t, http.StatusCreated, doAgentJSON(t, http.MethodPost, api2+"/agents/me/invite-human", agent.key,
		`{"email": "maria@example.com"}`, nil))

	// No worker yet: the serve processes only wrote the outbox.
	time.Sleep(time.Second)
	require.Empty(t, smtpSrv.Messages(), "a serve process sends no mail")
	e.Worker("worker")
	got := smtpSrv.WaitMessages(t, 1, processTestTimeout)
	require.Equal(t, []string{"maria@example.com"}, got[0].To)
	path := regexp.MustCompile(`/app/invite/[A-Za-z0-9_-]+`).FindString(got[0].Text)
	require.NotEmpty(t, path, got[0].Text)

	// The person signs up from the link on the second serve process.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(api2 + path)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	formToken := regexp.MustCompile(`name="form_token" value="([^"]+)"`).FindStringSubmatch(string(page))
	require.Len(t, formToken, 2, string(page))
	resp, err = browser.PostForm(api2+path, url.Values{"username": {"maria"}, "form_token": {formToken[1]}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "signed up and sent home")

	approved := events.wait(t, "pairing.approved")
	require.Equal(t, "maria", approved["data"].(map[string]any)["username"])
	require.Equal(t, "approved", agentPairing(t, api1, agent.key).Status)
	time.Sleep(time.Second)
	require.Len(t, smtpSrv.Messages(), 1, "the invitation is sent once")
}
