package agentpay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"agentpay/internal/testenv"

	"github.com/stretchr/testify/require"
)

// TestStandardWebhooksLibrary: deliveries agentpay sent, captured on a
// loopback receiver, verified by the official Standard Webhooks library
// (npm standardwebhooks, testdata/standardwebhooks) with the secret exactly
// as issued: a fresh registration's, both secrets during a rotation's
// overlap, and an earlier-form secret once re-encoded as the docs say
// (as issued, the library derives another key from it).
func TestStandardWebhooksLibrary(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("testdata", "standardwebhooks"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		t.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node (version 20 or later) is required")

	ctx := context.Background()
	svc := newEndpointTestService(t, nil)
	rcv := testenv.NewReceiver(t, http.StatusOK)
	reg, _, testAuth := registerWithWebhook(t, svc, rcv.URL+"/hooks")
	fresh := deliverOne(t, svc, rcv, reg.Merchant, false)
	rolled, err := svc.RollWebhookSecret(ctx, testAuth, nil)
	require.NoError(t, err)
	overlap := deliverOne(t, svc, rcv, reg.Merchant, false)
	legacy := createWebhookMerchantWithSecret(t, svc, rcv.URL, legacySecret)
	old := deliverOne(t, svc, rcv, legacy, false)
	reencoded := "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.TrimPrefix(legacySecret, "whsec_")))

	type check struct {
		Secret  string            `json:"secret"`
		Headers map[string]string `json:"headers"`
		Body    []byte            `json:"body_base64"`
	}
	headers := func(r *testenv.Request) map[string]string {
		out := map[string]string{}
		for k := range r.Header {
			out[strings.ToLower(k)] = r.Header.Get(k)
		}
		return out
	}
	cases := []struct {
		name   string
		secret string
		r      *testenv.Request
		ok     bool
	}{
		{"a delivery with the secret registration issued", reg.Keys.TestWebhookSecret, fresh, true},
		{"during the overlap, the new secret", rolled.Secret, overlap, true},
		{"during the overlap, the replaced secret", reg.Keys.TestWebhookSecret, overlap, true},
		{"the live secret on a test delivery", reg.Keys.WebhookSecret, fresh, false},
		{"the new secret on a delivery before the roll", rolled.Secret, fresh, false},
		{"an earlier-form secret as issued", legacySecret, old, false},
		{"an earlier-form secret re-encoded", reencoded, old, true},
	}
	in := make([]check, len(cases))
	for i, c := range cases {
		in[i] = check{Secret: c.secret, Headers: headers(c.r), Body: c.r.Body}
	}
	stdin, err := json.Marshal(in)
	require.NoError(t, err)
	cmd := exec.Command(node, "verify.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var out []struct {
		OK    bool   `json:"ok"`
		Event string `json:"event"`
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(stdout, &out), string(stdout))
	require.Len(t, out, len(cases))
	for i, c := range cases {
		require.Equal(t, c.ok, out[i].OK, "%s: %+v", c.name, out[i])
		if c.ok {
			require.Equal(t, EventPaymentConfirmed, out[i].Event, c.name)
		} else {
			require.Equal(t, "No matching signature found", out[i].Error, c.name)
		}
	}
}
