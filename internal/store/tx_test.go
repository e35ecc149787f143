package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/hook"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

type txTestJobArgs struct {
	Note string `json:"note"`
}

func (txTestJobArgs) Kind() string { return "agentpay_tx_test" }

func createTestMerchant(ctx context.Context, tx *ent.Tx) error {
	_, err := tx.Merchant.Create().
		SetName("Shop").
		SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte("sealed")).
		Save(ctx)
	return err
}

func TestWithTxCommitsEntAndRiverTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)
	riverClient := testdb.InsertOnlyRiver(t, db)

	err := db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		require.NotNil(t, sqlTx)
		if err := createTestMerchant(ctx, tx); err != nil {
			return err
		}
		_, err := riverClient.InsertTx(ctx, sqlTx, txTestJobArgs{Note: "commit"}, nil)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 1, testdb.CountRows(t, db, "merchants"))
	require.Equal(t, 1, testdb.CountRows(t, db, "river_job"))
}

func TestWithTxRollsBackEntAndRiverTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)
	riverClient := testdb.InsertOnlyRiver(t, db)

	errBoom := errors.New("boom")
	err := db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if err := createTestMerchant(ctx, tx); err != nil {
			return err
		}
		if _, err := riverClient.InsertTx(ctx, sqlTx, txTestJobArgs{Note: "rollback"}, nil); err != nil {
			return err
		}
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 0, testdb.CountRows(t, db, "merchants"))
	require.Equal(t, 0, testdb.CountRows(t, db, "river_job"))
}

func TestWithTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)

	require.PanicsWithValue(t, "boom", func() {
		_ = db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
			require.NoError(t, createTestMerchant(ctx, tx))
			panic("boom")
		})
	})
	require.Equal(t, 0, testdb.CountRows(t, db, "merchants"))
	// The connection is usable again (on SQLite there is only one).
	require.NoError(t, db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		return createTestMerchant(ctx, tx)
	}))
	require.Equal(t, 1, testdb.CountRows(t, db, "merchants"))
}

func TestWithTxNestedJoinsOuter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)

	errBoom := errors.New("boom")
	err := db.WithTx(ctx, func(ctx context.Context, outer *ent.Tx, outerSQL *sql.Tx) error {
		require.Same(t, outer, ent.TxFromContext(ctx))
		err := db.WithTx(ctx, func(ctx context.Context, inner *ent.Tx, innerSQL *sql.Tx) error {
			require.Same(t, outer, inner)
			require.Same(t, outerSQL, innerSQL)
			return createTestMerchant(ctx, inner)
		})
		require.NoError(t, err)
		// The inner call did not commit: failing now undoes its write too.
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, 0, testdb.CountRows(t, db, "merchants"))
}

// TestWithTxKeepsHooks: the transaction comes from the main client, so hooks
// registered on it run for writes inside WithTx.
func TestWithTxKeepsHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)

	var seen int
	db.Ent.Merchant.Use(func(next ent.Mutator) ent.Mutator {
		return hook.MerchantFunc(func(ctx context.Context, m *ent.MerchantMutation) (ent.Value, error) {
			seen++
			return next.Mutate(ctx, m)
		})
	})
	require.NoError(t, db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		return createTestMerchant(ctx, tx)
	}))
	require.Equal(t, 1, seen)
}

// TestWithTxRawSQLSeesEntWrites: ent and the *sql.Tx really are one
// transaction, not two that happen to commit together.
func TestWithTxRawSQLSeesEntWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)

	require.NoError(t, db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		require.NoError(t, createTestMerchant(ctx, tx))
		var n int
		require.NoError(t, sqlTx.QueryRowContext(ctx, "SELECT count(*) FROM merchants").Scan(&n))
		require.Equal(t, 1, n)
		return nil
	}))
	require.Contains(t, []string{dialect.SQLite, dialect.Postgres}, db.Dialect)
}

func TestForUpdateRunsOnBothEngines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)

	require.NoError(t, db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		if err := createTestMerchant(ctx, tx); err != nil {
			return err
		}
		merchants, err := store.ForUpdate(db, tx.Merchant.Query()).All(ctx)
		require.Len(t, merchants, 1)
		return err
	}))
}
