package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/ent/wallet"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// TestAuthCacheFollowsCommits: what this instance commits to an agent is
// what its next request sees; what it rolls back is not; another instance
// (its own pool and cache) sees the change within the TTL, by the service's
// clock.
func TestAuthCacheFollowsCommits(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Clock: time.Now()})
	svc := newTestService(t, env, Config{})
	reg, err := svc.QuickRegister(ctx, "cached")
	require.NoError(t, err)
	const otherTTL = 2 * time.Second
	other := newTestService(t, env, Config{DB: testdb.Reopen(t, env.DB), AuthCacheTTL: otherTTL})

	auth := func(s *Service) *ent.Agent {
		t.Helper()
		a, err := s.Authenticate(ctx, reg.APIKey)
		require.NoError(t, err)
		return a
	}
	require.Zero(t, auth(svc).TxCount)
	require.Zero(t, auth(other).TxCount)

	// Rolled back: nothing to see.
	errRollback := errors.New("roll back")
	err = svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		require.NoError(t, tx.Agent.UpdateOneID(reg.Agent.ID).AddTxCount(1).Exec(ctx))
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	require.Zero(t, auth(svc).TxCount)

	// Committed: seen here at once, though the entry has not expired.
	err = svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		return tx.Agent.UpdateOneID(reg.Agent.ID).AddTxCount(1).Exec(ctx)
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), auth(svc).TxCount)

	// A new wallet is a change of its agent.
	_, err = svc.cfg.DB.Ent.Wallet.Create().SetAgentID(reg.Agent.ID).SetChain("base").
		SetAddress("0x00000000000000000000000000000000000000aa").SetKind("external").Save(ctx)
	require.NoError(t, err)
	require.Len(t, auth(svc).Edges.Wallets, 3)

	// The other instance knows nothing of it until its entry expires.
	require.Zero(t, auth(other).TxCount, "served from the other instance's cache")
	env.Clock.Advance(otherTTL - time.Nanosecond)
	require.Zero(t, auth(other).TxCount, "still within the TTL")
	env.Clock.Advance(time.Nanosecond)
	a := auth(other)
	require.Equal(t, int64(1), a.TxCount)
	require.Len(t, a.Edges.Wallets, 3)
}

// Writes to other agents (a registration, with its trust score) leave an
// agent's entry alone: the cache is dropped per agent, not wholesale.
func TestAuthCacheKeepsOtherAgents(t *testing.T) {
	ctx := context.Background()
	// The service's clock stands still: the entry never expires on its own.
	env := testenv.New(t, testenv.Options{Clock: time.Now()})
	svc := newTestService(t, env, Config{})
	// Same pool: sees every write svc makes through ent.
	cached := newTestService(t, env, Config{AuthCacheTTL: 5 * time.Second})
	reg, err := svc.QuickRegister(ctx, "kept")
	require.NoError(t, err)
	a, err := cached.Authenticate(ctx, reg.APIKey)
	require.NoError(t, err)
	require.Zero(t, a.TxCount)

	// A change the cache cannot see (not through ent) shows whether the
	// entry is still served.
	q := "UPDATE agents SET tx_count = 7 WHERE id = ?"
	if svc.cfg.DB.IsPostgres() {
		q = "UPDATE agents SET tx_count = 7 WHERE id = $1"
	}
	_, err = svc.cfg.DB.SQL.ExecContext(ctx, q, reg.Agent.ID)
	require.NoError(t, err)
	_, err = svc.QuickRegister(ctx, "someone_else")
	require.NoError(t, err)
	a, err = cached.Authenticate(ctx, reg.APIKey)
	require.NoError(t, err)
	require.Zero(t, a.TxCount, "the entry survived another agent's registration")

	// A change of this agent through ent drops it.
	require.NoError(t, svc.cfg.DB.Ent.Agent.UpdateOneID(reg.Agent.ID).SetHumanVerified(true).Exec(ctx))
	a, err = cached.Authenticate(ctx, reg.APIKey)
	require.NoError(t, err)
	require.EqualValues(t, 7, a.TxCount)
	require.True(t, a.HumanVerified)
}

// The authentication statements list the columns they read by hand (a
// hot path, in raw SQL): every column of the ent schema must be among them,
// or a new field would read as its zero value on every authenticated
// request, without an error.
func TestAuthColumnsAreTheSchemas(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, agent.Columns, authAgentColumns, "authAgentColumns (and scanAuthRows) must read every agents column")
	require.ElementsMatch(t, wallet.Columns, authWalletColumns, "authWalletColumns (and scanAuthRows) must read every wallets column")
}

// What Authenticate reads by hand is what ent reads: every field of the
// agent and of its wallets, each in its place.
func TestAuthenticateReadsEveryField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, nil, Config{})
	reg, err := svc.QuickRegister(ctx, "every_field")
	require.NoError(t, err)
	// Every field the registration left at its zero value gets one.
	db := svc.cfg.DB
	db.Ent.Agent.UpdateOneID(reg.Agent.ID).
		SetTrustScore(42).SetTier(agent.TierT2).SetPartnerVerified(true).SetPartnerProvider("provider").
		SetPartnerSubject("subject").SetHumanVerified(true).SetExternalWalletVerified(true).
		SetTxCount(3).SetVolumeSent(4).SetVolumeReceived(5).SetFeesPaid(6).
		SetAPIKeyRotatedAt(time.Now().UTC().Truncate(time.Second)).
		ExecX(ctx)
	db.Ent.Wallet.Create().SetAgentID(reg.Agent.ID).SetChain("base").SetKind(wallet.KindExternal).
		SetAddress("0x00000000000000000000000000000000000000aa").SetVerified(true).ExecX(ctx)

	want := db.Ent.Agent.Query().Where(agent.ID(reg.Agent.ID)).WithWallets().OnlyX(ctx)
	sortWallets(want.Edges.Wallets)
	got, err := svc.Authenticate(ctx, reg.APIKey)
	require.NoError(t, err)
	requireSameFields(t, want, got)
	require.Len(t, got.Edges.Wallets, len(want.Edges.Wallets))
	for i := range want.Edges.Wallets {
		requireSameFields(t, want.Edges.Wallets[i], got.Edges.Wallets[i])
	}
}

// requireSameFields compares the exported fields of two ent entities (not
// their edges, nor ent's own unexported state).
func requireSameFields[E any](t *testing.T, want, got *E) {
	t.Helper()
	w, g := reflect.ValueOf(want).Elem(), reflect.ValueOf(got).Elem()
	for i := range w.NumField() {
		f := w.Type().Field(i)
		if !f.IsExported() || f.Name == "Edges" {
			continue
		}
		require.Equal(t, w.Field(i).Interface(), g.Field(i).Interface(), "%s.%s", w.Type().Name(), f.Name)
	}
}
