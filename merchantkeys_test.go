package agentpay

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent/merchantkey"
	"agentpay/internal/vault"
)

func TestMerchantWebhookSecretSealed(t *testing.T) {
	svc := newMerchantTestService(t)
	ctx := context.Background()
	a, b := newMerchant(t, svc), newMerchant(t, svc)

	got, err := svc.openWebhookSecret(a.Merchant.ID, a.Merchant.WebhookSecretEncrypted)
	require.NoError(t, err)
	require.Equal(t, a.Keys.WebhookSecret, got)
	require.Regexp(t, `^whsec_[0-9A-Za-z]{43}$`, got)

	// Read back from the database, it still opens; moved to another
	// merchant's row, it does not.
	row := svc.cfg.DB.Ent.Merchant.GetX(ctx, a.Merchant.ID)
	got, err = svc.openWebhookSecret(row.ID, row.WebhookSecretEncrypted)
	require.NoError(t, err)
	require.Equal(t, a.Keys.WebhookSecret, got)
	moved := *b.Merchant
	moved.WebhookSecretEncrypted = row.WebhookSecretEncrypted
	_, err = svc.openWebhookSecret(moved.ID, moved.WebhookSecretEncrypted)
	require.ErrorIs(t, err, vault.ErrOpen)
}

func TestRollMerchantKeysConcurrently(t *testing.T) {
	svc := newMerchantTestService(t)
	ctx := context.Background()
	reg := newMerchant(t, svc)
	auth, err := svc.AuthenticateMerchant(ctx, reg.Keys.LiveSecretKey)
	require.NoError(t, err)

	const n = 6
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, unau int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.RollMerchantKeys(ctx, auth)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrUnauthorized):
				unau++
			default:
				t.Errorf("roll: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, ok, "one roll per key")
	require.Equal(t, n-1, unau)
	// Exactly one live and one test pair are current.
	active := svc.cfg.DB.Ent.MerchantKey.Query().
		Where(merchantkey.MerchantID(reg.Merchant.ID), merchantkey.RevokedAtIsNil()).AllX(ctx)
	require.Len(t, active, 2)
	require.NotEqual(t, active[0].Kind, active[1].Kind)
}
