package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"agentpay/internal/vault"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestAdminDeactivateMerchant runs `agentpay admin deactivate-merchant ID`
// against a SQLite database and checks the merchant's keys are then refused
// with ErrForbidden (403 in the API).
func TestAdminDeactivateMerchant(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"DATA_DIR": dataDir, "LOG_LEVEL": "error"}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, getenv, &out, os.Stderr))

	// A merchant registered through the service `agentpay serve` builds.
	cfg, err := loadConfig(getenv)
	require.NoError(t, err)
	key, err := vault.GenerateMasterKey()
	require.NoError(t, err)
	p, err := openPlatform(ctx, cfg, key)
	require.NoError(t, err)
	svc, err := p.service(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
	require.NoError(t, err)
	name, email := "Acme", "a@acme.test"
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	require.NoError(t, err)
	id := reg.Merchant.ID.String()

	// The command answers once the API instances' AUTH_CACHE_TTL has
	// passed, so none of them still accepts the keys by then.
	env["AUTH_CACHE_TTL"] = "1500ms"
	out.Reset()
	start := time.Now()
	require.NoError(t, run(ctx, []string{"admin", "deactivate-merchant", id}, getenv, &out, os.Stderr))
	require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "waits the configured TTL, not the default")
	require.Contains(t, out.String(), "merchant "+id+" (Acme) deactivated at ")
	_, err = svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.ErrorIs(t, err, agentpay.ErrForbidden)
	env["AUTH_CACHE_TTL"] = "0" // off: nothing to wait for below

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "deactivate-merchant", id}, getenv, &out, os.Stderr))
	require.Contains(t, out.String(), "was already deactivated at ")

	out.Reset()
	require.NoError(t, run(ctx, []string{"admin", "reactivate-merchant", id}, getenv, &out, os.Stderr))
	require.Contains(t, out.String(), "reactivated")
	_, err = svc.AuthenticateMerchant(ctx, reg.Keys.TestSecretKey)
	require.NoError(t, err)

	// Bad usage names the problem.
	for _, args := range [][]string{
		{"admin"},
		{"admin", "deactivate-merchant"},
		{"admin", "deactivate-merchant", "not-a-uuid"},
		{"admin", "deactivate-merchant", uuid.NewString()},
		{"admin", "drop-everything", id},
	} {
		out.Reset()
		require.Error(t, run(ctx, args, getenv, &out, os.Stderr), "%v", args)
	}
	require.NoError(t, p.db.Close())
}
