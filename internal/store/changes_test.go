package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/testdb"
)

// TestOnChangeAnnouncesCommittedChanges: a listener hears of a change once
// it is committed (at once outside a transaction, at the commit inside
// one), never of a rollback or a failed mutation, and no longer once
// unsubscribed.
func TestOnChangeAnnouncesCommittedChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)

	var seen, committed []ent.Op
	unsubscribe := db.OnChange(func(m ent.Mutation) func() {
		if m.Type() != ent.TypeMerchant {
			return nil
		}
		op := m.Op()
		seen = append(seen, op)
		return func() { committed = append(committed, op) }
	})
	// Another listener hears the same changes.
	others := 0
	db.OnChange(func(m ent.Mutation) func() {
		if m.Type() != ent.TypeMerchant {
			return nil
		}
		return func() { others++ }
	})

	// Outside a transaction: announced when the write returns.
	m, err := db.Ent.Merchant.Create().SetName("Shop").SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte("sealed")).Save(ctx)
	require.NoError(t, err)
	require.Equal(t, []ent.Op{ent.OpCreate}, committed)

	// Inside one: asked before the write, announced only at the commit.
	require.NoError(t, db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		require.NoError(t, tx.Merchant.UpdateOneID(m.ID).SetName("Shop 2").Exec(ctx))
		require.Equal(t, []ent.Op{ent.OpCreate, ent.OpUpdateOne}, seen)
		require.Len(t, committed, 1, "not announced before the commit")
		return nil
	}))
	require.Equal(t, []ent.Op{ent.OpCreate, ent.OpUpdateOne}, committed)

	// Rolled back: never announced.
	errRollback := errors.New("roll back")
	err = db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		require.NoError(t, tx.Merchant.UpdateOneID(m.ID).SetName("Shop 3").Exec(ctx))
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	require.Len(t, committed, 2)

	// A failed write: never announced.
	err = db.Ent.Merchant.UpdateOneID(uuid.New()).SetName("nobody").Exec(ctx)
	require.True(t, ent.IsNotFound(err), "got %v", err)
	require.Len(t, committed, 2)

	// Changes to rows the listener does not follow: nothing.
	require.NoError(t, db.Ent.Agent.Create().SetUsername("agent1").SetAPIKeyHash([]byte("h")).SetInviteCode("c").Exec(ctx))
	require.Len(t, committed, 2)
	require.Equal(t, 2, others)

	unsubscribe()
	require.NoError(t, db.Ent.Merchant.UpdateOneID(m.ID).SetName("Shop 4").Exec(ctx))
	require.Len(t, committed, 2, "unsubscribed")
	require.Equal(t, 3, others, "the other listener still hears")
}
