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

// TestMerchantWebhookSecretSealed: registration issues one secret per
// mode, in the Standard Webhooks form, sealed to the merchant and the mode:
// neither opens on another merchant's row or in the other mode's column.
func TestMerchantWebhookSecretSealed(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	a, b := newMerchant(t, svc), newMerchant(t, svc)
	require.NotEqual(t, a.Keys.WebhookSecret, a.Keys.TestWebhookSecret)

	row := svc.cfg.DB.Ent.Merchant.GetX(ctx, a.Merchant.ID)
	for _, tt := range []struct {
		mode   Mode
		sealed []byte
		plain  string
	}{
		{ModeLive, row.WebhookSecretEncrypted, a.Keys.WebhookSecret},
		{ModeTest, row.TestWebhookSecretEncrypted, a.Keys.TestWebhookSecret},
	} {
		require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, tt.plain)
		require.NotContains(t, string(tt.sealed), tt.plain)
		got, err := svc.openWebhookSecret(row.ID, tt.mode, tt.sealed)
		require.NoError(t, err)
		require.Equal(t, tt.plain, got)
		_, err = svc.openWebhookSecret(b.Merchant.ID, tt.mode, tt.sealed)
		require.ErrorIs(t, err, vault.ErrOpen, "moved to another merchant")
		other := ModeTest
		if tt.mode == ModeTest {
			other = ModeLive
		}
		_, err = svc.openWebhookSecret(row.ID, other, tt.sealed)
		require.ErrorIs(t, err, vault.ErrOpen, "moved to the other mode")
	}
}

func TestRollMerchantKeysConcurrently(t *testing.T) {
	svc := newTestService(t, nil, Config{})
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
			_, err := svc.RollMerchantKeys(ctx, auth, "")
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

// TestRollMerchantKeysPerMode: a roll replaces one mode's pair. A test key
// rolls the test pair and is never given a live key (asking for live mode
// is forbidden and revokes nothing); a live key rolls its own pair, or the
// test pair when it asks.
func TestRollMerchantKeysPerMode(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	reg := newMerchant(t, svc)
	auth := func(key string) *MerchantAuth {
		a, err := svc.AuthenticateMerchant(ctx, key)
		require.NoError(t, err)
		return a
	}
	works := func(key string) bool {
		_, err := svc.AuthenticateMerchant(ctx, key)
		return err == nil
	}
	current := func() int {
		return svc.cfg.DB.Ent.MerchantKey.Query().Where(merchantkey.MerchantID(reg.Merchant.ID), merchantkey.RevokedAtIsNil()).CountX(ctx)
	}

	_, err := svc.RollMerchantKeys(ctx, auth(reg.Keys.TestSecretKey), ModeLive)
	require.ErrorIs(t, err, ErrForbidden)
	require.EqualError(t, err, "insufficient permissions: a test key rolls test keys only; rolling live keys needs a live secret key")
	require.True(t, works(reg.Keys.LiveSecretKey) && works(reg.Keys.TestSecretKey), "a refused roll revokes nothing")
	_, err = svc.RollMerchantKeys(ctx, auth(reg.Keys.LiveSecretKey), "staging")
	require.True(t, IsValidation(err), "%v", err)

	byTest, err := svc.RollMerchantKeys(ctx, auth(reg.Keys.TestSecretKey), "")
	require.NoError(t, err)
	require.Equal(t, MerchantKeys{TestPublicKey: byTest.TestPublicKey, TestSecretKey: byTest.TestSecretKey}, *byTest,
		"the test pair only: no live key, no webhook secret")
	require.Regexp(t, `^sk_test_`, byTest.TestSecretKey)
	require.False(t, works(reg.Keys.TestSecretKey))
	require.True(t, works(reg.Keys.LiveSecretKey), "the live pair is untouched")
	require.True(t, works(byTest.TestSecretKey))
	require.Equal(t, 2, current())

	byLive, err := svc.RollMerchantKeys(ctx, auth(reg.Keys.LiveSecretKey), "")
	require.NoError(t, err)
	require.Equal(t, MerchantKeys{LivePublicKey: byLive.LivePublicKey, LiveSecretKey: byLive.LiveSecretKey}, *byLive)
	require.False(t, works(reg.Keys.LiveSecretKey))
	require.True(t, works(byTest.TestSecretKey), "the test pair is untouched")

	// A live key replaces a lost test key.
	testByLive, err := svc.RollMerchantKeys(ctx, auth(byLive.LiveSecretKey), ModeTest)
	require.NoError(t, err)
	require.NotEmpty(t, testByLive.TestSecretKey)
	require.Empty(t, testByLive.LiveSecretKey)
	require.False(t, works(byTest.TestSecretKey))
	require.True(t, works(byLive.LiveSecretKey))
	require.True(t, works(testByLive.TestSecretKey))
	require.Equal(t, 2, current())
}
