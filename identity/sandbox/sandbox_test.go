package sandbox_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/identity"
	"agentpay/identity/sandbox"
)

var secret = []byte("sandbox-callback-secret-of-32-bytes!")

func TestVerify(t *testing.T) {
	now := time.Now()
	body := []byte(`{"event_id":"evt_1"}`)
	for _, tc := range []struct {
		name   string
		header string
		body   []byte
		ok     bool
	}{
		{"signed now", sandbox.Sign(secret, body, now), body, true},
		{"within the tolerance", sandbox.Sign(secret, body, now.Add(-sandbox.Tolerance+time.Second)), body, true},
		{"a second signature among others", "t=" + strings.Split(sandbox.Sign(secret, body, now), ",")[0][2:] + ",v1=00ff," + strings.Split(sandbox.Sign(secret, body, now), ",")[1], body, true},
		{"empty", "", body, false},
		{"no signature", "t=1", body, false},
		{"no time", "v1=" + strings.Repeat("0", 64), body, false},
		{"other secret", sandbox.Sign([]byte("another-secret-of-at-least-32-bytes"), body, now), body, false},
		{"other body", sandbox.Sign(secret, body, now), []byte(`{"event_id":"evt_2"}`), false},
		{"too old", sandbox.Sign(secret, body, now.Add(-sandbox.Tolerance-time.Second)), body, false},
		{"from the future", sandbox.Sign(secret, body, now.Add(sandbox.Tolerance+time.Second)), body, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sandbox.Verify(secret, tc.header, tc.body, now)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, identity.ErrSignature)
			}
		})
	}
}

func TestCallbackBody(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{Secret: secret})
	require.NoError(t, err)
	now := time.Now()
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"good", `{"event_id":"e","reference":"r","state":"verified","occurred_at":"2026-11-26T10:00:00Z"}`, true},
		{"unknown field", `{"event_id":"e","reference":"r","state":"verified","occurred_at":"2026-11-26T10:00:00Z","name":"Ann"}`, false},
		{"unknown state", `{"event_id":"e","reference":"r","state":"approved","occurred_at":"2026-11-26T10:00:00Z"}`, false},
		{"no event id", `{"reference":"r","state":"verified","occurred_at":"2026-11-26T10:00:00Z"}`, false},
		{"long reference", `{"event_id":"e","reference":"` + strings.Repeat("r", 101) + `","state":"verified","occurred_at":"2026-11-26T10:00:00Z"}`, false},
		{"no time", `{"event_id":"e","reference":"r","state":"verified"}`, false},
		{"not JSON", `event=verified`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(sandbox.SignatureHeader, sandbox.Sign(secret, []byte(tc.body), now))
			res, err := sb.Callback(h, []byte(tc.body), now)
			if !tc.ok {
				require.ErrorIs(t, err, identity.ErrMalformed)
				return
			}
			require.NoError(t, err)
			require.Equal(t, identity.Result{EventID: "e", Reference: "r", State: identity.StateVerified,
				OccurredAt: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}, res)
		})
	}
	_, err = sandbox.New(sandbox.Config{Secret: []byte("short")})
	require.Error(t, err, "a short secret is refused")
}

// TestPage: the hosted page calls the service's endpoint over HTTP with a
// signed result and sends the person back; an unknown session is 404, and
// a refused callback is shown, the person staying on the page.
func TestPage(t *testing.T) {
	var mu sync.Mutex
	var got []identity.Result
	status := http.StatusOK
	var sb *sandbox.Sandbox
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/identity/callbacks/sandbox", r.URL.Path)
		body, _ := io.ReadAll(r.Body)
		res, err := sb.Callback(r.Header, body, time.Now())
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, res)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"detail":"nope"}`)
	}))
	t.Cleanup(service.Close)
	var err error
	sb, err = sandbox.New(sandbox.Config{Secret: secret, CallbackURL: service.URL + "/identity/callbacks/sandbox"})
	require.NoError(t, err)
	pages := httptest.NewServer(sb.Handler())
	t.Cleanup(pages.Close)

	started, err := sb.Start(context.Background(), identity.StartRequest{VerificationID: "v1", ReturnURL: "https://app.example/app/"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(started.URL, "/dev/kyc/sbx_"), started.URL)

	resp, err := http.Get(pages.URL + started.URL)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `id="kyc-verified"`)

	resp, err = http.Get(pages.URL + "/dev/kyc/sbx_unknown")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.PostForm(pages.URL+started.URL, url.Values{"outcome": {"verified"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "https://app.example/app/", resp.Header.Get("Location"))
	require.Len(t, got, 1)
	require.Equal(t, started.Reference, got[0].Reference)
	require.Equal(t, identity.StateVerified, got[0].State)

	status = http.StatusConflict
	resp, err = noRedirect.PostForm(pages.URL+started.URL, url.Values{"outcome": {"rejected"}})
	require.NoError(t, err)
	page, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Contains(t, string(page), "the service refused the callback: 409")

	resp, err = noRedirect.PostForm(pages.URL+started.URL, url.Values{"outcome": {"pending"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "pending is not an outcome")
}
