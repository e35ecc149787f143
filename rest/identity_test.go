package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/user"
	"agentpay/identity/sandbox"
)

// TestIdentityCallback: the provider's endpoint answers each refusal with
// its status and detail and changes nothing; a good callback is applied
// once.
func TestIdentityCallback(t *testing.T) {
	secret := []byte("sandbox-callback-secret-of-32-bytes!")
	sb, err := sandbox.New(sandbox.Config{Secret: secret})
	require.NoError(t, err)
	api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{IdentityProvider: sb}})
	ctx := context.Background()
	u, err := api.Svc.CreateUser(ctx, agentpay.NewUser{Email: "ann@example.com", Username: "ann_human"})
	require.NoError(t, err)
	started, err := api.Svc.StartIdentityVerification(ctx, &agentpay.Viewer{User: u})
	require.NoError(t, err)
	ref := strings.TrimPrefix(started.URL, "/dev/kyc/")

	body, err := json.Marshal(map[string]any{"event_id": "evt_1", "reference": ref, "state": "verified", "occurred_at": time.Now().UTC()})
	require.NoError(t, err)
	signed := func(b []byte) http.Header {
		return http.Header{sandbox.SignatureHeader: {sandbox.Sign(secret, b, time.Now())}}
	}
	status := func() user.IdentityStatus {
		got, err := api.DB.Ent.User.Get(ctx, u.ID)
		require.NoError(t, err)
		return got.IdentityStatus
	}
	for _, tc := range []struct {
		name   string
		path   string
		body   []byte
		header http.Header
		status int
		detail string
	}{
		{"unknown provider", "/identity/callbacks/acme", body, signed(body), http.StatusNotFound, `not found: no identity provider "acme"`},
		{"no signature", "/identity/callbacks/sandbox", body, nil, http.StatusBadRequest, "signature: no timestamp or signature"},
		{"forged", "/identity/callbacks/sandbox", body, http.Header{sandbox.SignatureHeader: {sandbox.Sign([]byte("another-secret-of-at-least-32-bytes"), body, time.Now())}},
			http.StatusBadRequest, "signature: no signature matches"},
		{"stale", "/identity/callbacks/sandbox", body, http.Header{sandbox.SignatureHeader: {sandbox.Sign(secret, body, time.Now().Add(-time.Hour))}},
			http.StatusBadRequest, "signature: timestamp outside the 5m0s tolerance"},
		{"oversize", "/identity/callbacks/sandbox", []byte(`{"x":"` + strings.Repeat("x", agentpay.MaxCallbackBytes) + `"}`), nil, http.StatusRequestEntityTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := api.do(http.MethodPost, tc.path, tc.body, tc.header)
			require.Equal(t, tc.status, res.Status, string(res.Body))
			if tc.detail != "" {
				require.Equal(t, tc.detail, res.Map(t)["detail"])
			}
			require.Equal(t, user.IdentityStatusPending, status())
		})
	}

	res := api.do(http.MethodPost, "/identity/callbacks/sandbox", body, signed(body))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	require.JSONEq(t, `{"received": true}`, string(res.Body))
	require.Equal(t, user.IdentityStatusVerified, status())

	res = api.do(http.MethodPost, "/identity/callbacks/sandbox", body, signed(body))
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, "conflict: callback event evt_1 was already applied", res.Map(t)["detail"])
}
