package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/signaturechallenge"
	"agentpay/internal/testdb"
)

// TestWorkerPrunesSignatureChallenges: the periodic job (run when the
// worker starts) deletes expired challenges and keeps the others.
func TestWorkerPrunesSignatureChallenges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := testdb.Open(t)
	key, err := agentpay.GenerateMasterKey()
	require.NoError(t, err)
	vault, err := agentpay.NewVault(key)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := agentpay.NewService(agentpay.Config{DB: db, Vault: vault, Logger: logger})
	require.NoError(t, err)

	challenge := func(nonce string, expires time.Time) {
		db.Ent.SignatureChallenge.Create().SetPurpose(signaturechallenge.PurposeRegister).SetNonce(nonce).
			SetUsername("someone").SetWalletAddress("0x0000000000000000000000000000000000000001").
			SetExpiresAt(expires.UTC()).SaveX(ctx)
	}
	challenge("0xexpired", time.Now().Add(-time.Minute))
	challenge("0xvalid", time.Now().Add(time.Minute))

	w, err := New(Config{DB: db, Service: svc, Logger: logger})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	require.Eventually(t, func() bool {
		n, err := db.Ent.SignatureChallenge.Query().Count(ctx)
		return err == nil && n == 1
	}, 20*time.Second, 50*time.Millisecond)
	left := db.Ent.SignatureChallenge.Query().OnlyX(ctx)
	require.Equal(t, "0xvalid", left.Nonce)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
}
