package store_test

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
	"agentpay/internal/store"
	"agentpay/internal/testdb"
)

func TestOpenDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	db := testdb.OpenEmpty(t)
	require.NoError(t, db.Ping(ctx))
	// The wrapped driver still offers ent's raw ExecQuerier (sql/execquery).
	rows, err := db.Ent.QueryContext(ctx, "SELECT 1")
	require.NoError(t, err)
	require.NoError(t, rows.Close())
	if testdb.IsPostgres() {
		require.Equal(t, store.DialectPostgres, db.Dialect)
		return
	}
	require.Equal(t, store.DialectSQLite, db.Dialect)
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

	_, err := store.OpenDB(context.Background(), store.DBConfig{})
	require.Error(t, err)
}

// TestSchemaRoundTrip writes and reads back the types that differ between
// the engines (UUIDs, decimals stored as numeric/text, JSON, bytes) and
// checks the unique constraints the service relies on.
func TestSchemaRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.Open(t)
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
