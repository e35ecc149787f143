package agentpay

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent/merchant"
	"agentpay/ent/merchantkey"
	"agentpay/internal/vault"
)

func strp(s string) *string { return &s }

// newMerchant registers a minimal merchant.
func newMerchant(t *testing.T, svc *Service) *MerchantRegistration {
	t.Helper()
	reg, err := svc.RegisterMerchant(context.Background(), MerchantInput{Name: strp("Acme"), Email: strp("a@acme.test")})
	require.NoError(t, err)
	return reg
}

func TestAuthenticateMerchant(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	reg := newMerchant(t, svc)

	for _, tt := range []struct {
		key  string
		mode Mode
	}{{reg.Keys.LiveSecretKey, ModeLive}, {reg.Keys.TestSecretKey, ModeTest}} {
		auth, err := svc.AuthenticateMerchant(ctx, tt.key)
		require.NoError(t, err)
		require.Equal(t, reg.Merchant.ID, auth.Merchant.ID)
		require.Equal(t, tt.mode, auth.Mode)
		require.Equal(t, tt.mode == ModeLive, auth.Livemode())
	}
	for _, tt := range []struct {
		key  string
		mode Mode
	}{{reg.Keys.LivePublicKey, ModeLive}, {reg.Keys.TestPublicKey, ModeTest}} {
		auth, err := svc.MerchantByPublicKey(ctx, tt.key)
		require.NoError(t, err)
		require.Equal(t, reg.Merchant.ID, auth.Merchant.ID)
		require.Equal(t, tt.mode, auth.Mode)
	}
	// Keys of the wrong kind, or with a prefix swapped, are refused.
	swapped := vault.PrefixSecretTest + reg.Keys.LiveSecretKey[len(vault.PrefixSecretLive):]
	for _, k := range []string{"", reg.Keys.LivePublicKey, reg.Keys.WebhookSecret, swapped, reg.Keys.LiveSecretKey + "x"} {
		_, err := svc.AuthenticateMerchant(ctx, k)
		require.ErrorIs(t, err, ErrUnauthorized, k)
	}
	for _, k := range []string{"", reg.Keys.LiveSecretKey, "pk_live_x"} {
		_, err := svc.MerchantByPublicKey(ctx, k)
		require.ErrorIs(t, err, ErrUnauthorized, k)
	}
}

func TestDeactivateMerchant(t *testing.T) {
	svc := newTestService(t, nil, Config{})
	ctx := context.Background()
	reg := newMerchant(t, svc)

	m, err := svc.DeactivateMerchant(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.False(t, m.Active)
	require.NotNil(t, m.DeactivatedAt)
	first := *m.DeactivatedAt

	again, err := svc.DeactivateMerchant(ctx, reg.Merchant.ID)
	require.NoError(t, err)
	require.True(t, first.Equal(*again.DeactivatedAt), "deactivating twice keeps the first time")

	for _, k := range []string{reg.Keys.LiveSecretKey, reg.Keys.TestSecretKey} {
		_, err := svc.AuthenticateMerchant(ctx, k)
		require.ErrorIs(t, err, ErrForbidden)
	}
	_, err = svc.MerchantByPublicKey(ctx, reg.Keys.LivePublicKey)
	require.ErrorIs(t, err, ErrForbidden)

	_, err = svc.DeactivateMerchant(ctx, uuid.New())
	require.ErrorIs(t, err, ErrNotFound)

	// A request authenticated just before the deactivation cannot update
	// or roll afterwards.
	m2 := newMerchant(t, svc)
	auth, err := svc.AuthenticateMerchant(ctx, m2.Keys.LiveSecretKey)
	require.NoError(t, err)
	_, err = svc.DeactivateMerchant(ctx, m2.Merchant.ID)
	require.NoError(t, err)
	_, err = svc.UpdateMerchant(ctx, auth, MerchantInput{Name: strp("New")})
	require.ErrorIs(t, err, ErrForbidden)
	_, err = svc.RollMerchantKeys(ctx, auth, "")
	require.ErrorIs(t, err, ErrForbidden)
	require.Equal(t, 2, svc.cfg.DB.Ent.MerchantKey.Query().
		Where(merchantkey.MerchantID(m2.Merchant.ID), merchantkey.RevokedAtIsNil()).CountX(ctx), "a refused roll revokes nothing")
	require.Equal(t, "Acme", svc.cfg.DB.Ent.Merchant.Query().Where(merchant.ID(m2.Merchant.ID)).OnlyX(ctx).Name)
}
