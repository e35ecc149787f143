package rest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/mail"
)

// GET /dev/mail: the catcher's mail to one address (any case), newest
// first, with the links of each text part; mail to another address is not
// listed, nor mail the catcher did not take (queued, or sent over SMTP: the
// outbox keeps no body once sent).
func TestDevMailGolden(t *testing.T) {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	catcher := mail.NewCatcher(func() time.Time { at = at.Add(time.Second); return at })
	api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{Mailer: catcher}})
	srv := httptest.NewServer(NewRouter(Config{Service: api.Svc, Logger: discardLogger(), Dev: true}))
	t.Cleanup(srv.Close)

	ctx := context.Background()
	add := func(to, subject, text, html string) {
		require.NoError(t, catcher.Send(ctx, mail.Message{ID: uuid.Must(uuid.NewV7()).String(), To: to, Subject: subject, Text: text, HTML: html}))
	}
	add("ana@example.com", "You're invited", "Join: http://127.0.0.1:8080/app/invite/Q7x9.\nSee you.",
		`<p><a href="http://127.0.0.1:8080/app/invite/Q7x9">Join</a></p>`)
	add("bob@example.com", "Not Ana's", "https://elsewhere.example/x", "")
	add("Ana@Example.com", "Sign in", "Sign in: https://app.example/signin/tok (15 minutes).", "")

	get := func(query string) (int, []byte) {
		resp, err := http.Get(srv.URL + "/dev/mail?" + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		return resp.StatusCode, body
	}
	status, body := get("to=" + url.QueryEscape("ana@example.com"))
	require.Equal(t, http.StatusOK, status, string(body))
	assertGolden(t, "dev_mail", body, nil)

	status, body = get("to=nobody%40example.com")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"messages":[]}`, string(body))

	status, body = get("")
	require.Equal(t, http.StatusBadRequest, status)
	require.JSONEq(t, `{"detail":"to: is required"}`, string(body))
}
