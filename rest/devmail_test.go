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
)

// GET /dev/mail: the catcher's mail to one address (any case), newest
// first, with the links of each text part; mail not yet caught, sent over
// SMTP, or to another address is not listed.
func TestDevMailGolden(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	srv := httptest.NewServer(NewRouter(Config{Service: api.Svc, Logger: discardLogger(), Dev: true}))
	t.Cleanup(srv.Close)

	ctx := context.Background()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	add := func(to, subject, text, html string, sent *time.Time) {
		c := api.DB.Ent.MailMessage.Create().SetID(uuid.Must(uuid.NewV7())).
			SetCreatedAt(at).SetTo(to).SetSubject(subject).SetText(text).SetHTML(html)
		if sent != nil {
			c.SetSentAt(*sent).SetTransport("catcher").SetAttempts(1)
		}
		_, err := c.Save(ctx)
		require.NoError(t, err)
		at = at.Add(time.Second)
	}
	sent := func(d time.Duration) *time.Time { t := at.Add(d); return &t }
	add("ana@example.com", "You're invited", "Join: http://127.0.0.1:8080/app/invite/Q7x9.\nSee you.",
		`<p><a href="http://127.0.0.1:8080/app/invite/Q7x9">Join</a></p>`, sent(time.Second))
	add("bob@example.com", "Not Ana's", "https://elsewhere.example/x", "", sent(time.Second))
	add("Ana@Example.com", "Sign in", "Sign in: https://app.example/signin/tok (15 minutes).", "", sent(2*time.Second))
	add("ana@example.com", "Still queued", "https://app.example/queued", "", nil)
	_, err := api.DB.Ent.MailMessage.Create().SetID(uuid.Must(uuid.NewV7())).SetCreatedAt(at).
		SetTo("ana@example.com").SetSubject("Sent over SMTP").SetText("").SetHTML("").
		SetSentAt(at).SetTransport("smtp").Save(ctx)
	require.NoError(t, err)

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
