package agentpay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/schematype"
	"agentpay/internal/testdb/freshdb"
)

// openTestDB returns a new migrated database for a root-package test: SQLite
// in t.TempDir(), or a fresh PostgreSQL database when TEST_DATABASE_URL is
// set. (Tests in other packages use internal/testdb.Open.)
func openTestDB(tb testing.TB) *DB {
	tb.Helper()
	db := openEmptyTestDB(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := db.Migrate(ctx, nil)
	require.NoError(tb, err)
	return db
}

// openEmptyTestDB is openTestDB without migrations.
func openEmptyTestDB(tb testing.TB) *DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := OpenDB(ctx, DBConfig{URL: freshdb.URL(tb)})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// reopenTestDB opens another pool on db's database, as another process
// would.
func reopenTestDB(tb testing.TB, db *DB) *DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := OpenDB(ctx, DBConfig{URL: db.URL})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = other.Close() })
	return other
}

func TestOpenDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	db := openEmptyTestDB(t)
	require.NoError(t, db.Ping(ctx))
	// The wrapped driver still offers ent's raw ExecQuerier (sql/execquery).
	rows, err := db.Ent.QueryContext(ctx, "SELECT 1")
	require.NoError(t, err)
	require.NoError(t, rows.Close())
	if freshdb.IsPostgres() {
		require.Equal(t, DialectPostgres, db.Dialect)
		return
	}
	require.Equal(t, DialectSQLite, db.Dialect)
	require.Equal(t, 1, db.SQL.Stats().MaxOpenConnections)

	pragma := func(name string) string {
		var v string
		require.NoError(t, db.SQL.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v))
		return strings.ToLower(v)
	}
	require.Equal(t, "1", pragma("foreign_keys"))
	require.Equal(t, "wal", pragma("journal_mode"))
	require.Equal(t, "5000", pragma("busy_timeout"))
	require.Equal(t, "1", pragma("synchronous")) // NORMAL
}

func TestOpenDBRequiresURL(t *testing.T) {
	t.Parallel()

	_, err := OpenDB(context.Background(), DBConfig{})
	require.Error(t, err)
}

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		in       string
		wantPath string
	}{
		{in: "/data/agentpay.db", wantPath: "file:/data/agentpay.db"},
		{in: "data/agentpay.db", wantPath: "file:data/agentpay.db"},
		{in: "file:/data/agentpay.db", wantPath: "file:/data/agentpay.db"},
		{in: "sqlite:///data/agentpay.db", wantPath: "file:/data/agentpay.db"},
		{in: "file::memory:?cache=shared", wantPath: "file::memory:"},
	} {
		dsn, err := sqliteDSN(tt.in)
		require.NoError(t, err, tt.in)
		path, query, ok := strings.Cut(dsn, "?")
		require.True(t, ok)
		require.Equal(t, tt.wantPath, path, tt.in)
		for _, p := range []string{"foreign_keys%281%29", "journal_mode%28WAL%29", "busy_timeout%285000%29", "synchronous%28NORMAL%29", "_txlock=immediate"} {
			require.Contains(t, query, p, tt.in)
		}
	}

	// A pragma the caller sets is kept, not duplicated.
	dsn, err := sqliteDSN("file:x.db?_pragma=journal_mode(MEMORY)")
	require.NoError(t, err)
	require.Contains(t, dsn, "journal_mode%28MEMORY%29")
	require.NotContains(t, dsn, "journal_mode%28WAL%29")
}

// TestSchemaRoundTrip writes and reads back the types that differ between
// the engines (UUIDs, decimals stored as numeric/text, JSON, bytes) and
// checks the unique constraints the service relies on.
func TestSchemaRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTestDB(t)
	client := db.Ent

	merchant, err := client.Merchant.Create().
		SetName("Shop").
		SetEmail("shop@example.com").
		SetWebhookSecretEncrypted([]byte{0, 1, 2, 255}).
		SetAcceptedTokens([]schematype.TokenRef{{Chain: "base", Token: "USDC"}}).
		Save(ctx)
	require.NoError(t, err)

	amount := decimal.RequireFromString("1000000.01")
	session, err := client.CheckoutSession.Create().
		SetMerchantID(merchant.ID).
		SetExternalID("cs_1").
		SetLivemode(false).
		SetAmountUsd(amount).
		SetMetadata(map[string]any{"order": "42", "n": 1.5}).
		SetIdempotencyKey("key-1").
		SetExpiresAt(time.Now().UTC().Add(30 * time.Minute)).
		Save(ctx)
	require.NoError(t, err)

	got, err := client.CheckoutSession.Get(ctx, session.ID)
	require.NoError(t, err)
	require.True(t, amount.Equal(got.AmountUsd), "got %s", got.AmountUsd)
	require.Equal(t, "1000000.01", got.AmountUsd.String())
	require.Equal(t, "42", got.Metadata["order"])
	require.Equal(t, checkoutsession.StatusPending, got.Status)
	m, err := got.QueryMerchant().Only(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2, 255}, m.WebhookSecretEncrypted)
	require.Equal(t, []schematype.TokenRef{{Chain: "base", Token: "USDC"}}, m.AcceptedTokens)

	// Same merchant, mode and idempotency key: refused by the database.
	_, err = client.CheckoutSession.Create().
		SetMerchantID(merchant.ID).
		SetExternalID("cs_2").
		SetLivemode(false).
		SetAmountUsd(amount).
		SetIdempotencyKey("key-1").
		SetExpiresAt(time.Now().UTC()).
		Save(ctx)
	require.True(t, ent.IsConstraintError(err), "got %v", err)
	// The other mode, and sessions without a key, do not collide.
	for i, live := range []bool{true, false, false} {
		create := client.CheckoutSession.Create().
			SetMerchantID(merchant.ID).
			SetExternalID(fmt.Sprintf("cs_ok_%d", i)).
			SetLivemode(live).
			SetAmountUsd(amount).
			SetExpiresAt(time.Now().UTC())
		if i == 0 {
			create.SetIdempotencyKey("key-1")
		}
		require.NoError(t, create.Exec(ctx))
	}

	// A payment is recorded once per (chain, tx_hash, log_index).
	newPayment := func(externalID string, logIndex int) error {
		return client.Payment.Create().
			SetSessionID(session.ID).
			SetExternalID(externalID).
			SetChain("base").
			SetTxHash("0xabc").
			SetLogIndex(logIndex).
			SetFromAddress("0xfrom").
			SetToAddress("0xto").
			SetAmountToken(49_950_000).
			SetAmountUsd(decimal.RequireFromString("49.95")).
			SetBlockNumber(7).
			Exec(ctx)
	}
	require.NoError(t, newPayment("pay_1", 0))
	require.NoError(t, newPayment("pay_2", 1))
	require.True(t, ent.IsConstraintError(newPayment("pay_3", 1)))

	// Amount sums in base units are exact in SQL on both engines.
	var sum int64
	require.NoError(t, db.SQL.QueryRowContext(ctx, "SELECT sum(amount_token) FROM payments").Scan(&sum))
	require.Equal(t, int64(99_900_000), sum)
}
