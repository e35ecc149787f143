package agentpay

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/chains"
	"agentpay/ent"
	"agentpay/internal/store"
	"agentpay/internal/testenv"
)

func TestDeriveDepositKey(t *testing.T) {
	// Derivation reads no database.
	env := testenv.New(t, testenv.Options{NoDB: true})
	v := env.Vault
	svc := newTestService(t, env, Config{DB: &store.DB{}})

	tests := []struct {
		family  chains.Family
		index   int64
		wantErr bool
	}{
		{family: chains.FamilyEVM, index: 0},
		{family: chains.FamilyEVM, index: 1<<31 - 1},
		{family: chains.FamilySolana, index: 0},
		{family: chains.FamilySolana, index: 12345},
		{family: chains.FamilyEVM, index: 1 << 31, wantErr: true},
		{family: chains.FamilySolana, index: -1, wantErr: true},
		{family: "bitcoin", index: 0, wantErr: true},
	}
	for _, tt := range tests {
		_, addr, err := svc.deriveDepositKey(tt.family, tt.index)
		if tt.wantErr {
			require.Error(t, err, "%s/%d", tt.family, tt.index)
			continue
		}
		require.NoError(t, err)
		_, want, err := svc.cfg.Families[tt.family].DeriveKey(v.DepositSeed(), uint32(tt.index))
		require.NoError(t, err)
		require.Equal(t, want, addr, "%s/%d comes from the vault's deposit seed", tt.family, tt.index)
	}

	// A row whose index no longer derives its address is refused, not signed for.
	_, addr, err := svc.deriveDepositKey(chains.FamilyEVM, 3)
	require.NoError(t, err)
	_, err = svc.DepositAddressKey(&ent.DepositAddress{ChainFamily: string(chains.FamilyEVM), DerivationIndex: 4, Address: addr})
	require.ErrorContains(t, err, "derives another address")
	k, err := svc.DepositAddressKey(&ent.DepositAddress{ChainFamily: string(chains.FamilyEVM), DerivationIndex: 3, Address: addr})
	require.NoError(t, err)
	got, err := svc.wallets(chains.Polygon).AddressOf(k)
	require.NoError(t, err)
	require.Equal(t, addr, got)

	require.NotEqual(t, depositLockKey(chains.FamilyEVM), depositLockKey(chains.FamilySolana))
}

// TestAllocateDepositAddressCountsPerFamily: EVM chains share one index
// sequence (one key must never receive on two EVM chains under two
// sessions), Solana has its own.
func TestAllocateDepositAddressCountsPerFamily(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{})
	db := env.DB
	svc := newTestService(t, env, Config{})
	m := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").SetWebhookSecretEncrypted([]byte{1}).SaveX(ctx)

	steps := []struct {
		chain chains.Name
		index int64
	}{
		{chains.Base, 0}, {chains.Solana, 0}, {chains.Polygon, 1}, {chains.Arbitrum, 2}, {chains.Solana, 1}, {chains.Ethereum, 3},
	}
	for _, st := range steps {
		sess := db.Ent.CheckoutSession.Create().SetMerchantID(m.ID).SetExternalID("cs_" + uuid.NewString()).
			SetLivemode(false).SetAmountUsd(decimal.NewFromInt(1)).SetExpiresAt(time.Now().Add(time.Hour).UTC()).SaveX(ctx)
		var da *ent.DepositAddress
		err := db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			var err error
			da, err = svc.allocateDepositAddress(ctx, tx, sqlTx, sess.ID, st.chain)
			return err
		})
		require.NoError(t, err)
		require.Equal(t, st.index, da.DerivationIndex, "%s", st.chain)
		require.Equal(t, string(st.chain.Family()), da.ChainFamily)
		_, want, err := svc.deriveDepositKey(st.chain.Family(), st.index)
		require.NoError(t, err)
		require.Equal(t, want, da.Address)
	}
}
