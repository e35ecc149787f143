package testdb_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/internal/testdb"
)

func TestOpenGivesSeparateMigratedDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	a := testdb.Open(t)
	b := testdb.Open(t)

	require.NoError(t, a.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, _ *sql.Tx) error {
		return tx.Merchant.Create().
			SetName("Shop").
			SetEmail("shop@example.com").
			SetWebhookSecretEncrypted([]byte("sealed")).
			Exec(ctx)
	}))
	na, err := a.Ent.Merchant.Query().Count(ctx)
	require.NoError(t, err)
	nb, err := b.Ent.Merchant.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, na)
	require.Equal(t, 0, nb)

	// Already migrated: Migrate has nothing left to do, River's tables exist.
	res, err := a.Migrate(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Empty(t, res.RiverVersions)
	var jobs int
	require.NoError(t, a.SQL.QueryRowContext(ctx, "SELECT count(*) FROM river_job").Scan(&jobs))
	require.Zero(t, jobs)

	if testdb.IsPostgres() {
		require.Equal(t, "postgres", a.Dialect)
	} else {
		require.Equal(t, "sqlite3", a.Dialect)
	}
}

func TestOpenEmptyHasNoSchema(t *testing.T) {
	t.Parallel()

	db := testdb.OpenEmpty(t)
	_, err := db.Ent.Merchant.Query().Count(context.Background())
	require.Error(t, err)
}
