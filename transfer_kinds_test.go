package agentpay

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/migrate"
	"agentpay/ent/transfer"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/migrations"
)

// schemaTransferKinds are the values of the transfers.kind enum, as the
// schema declares them.
func schemaTransferKinds(t *testing.T) []string {
	t.Helper()
	for _, c := range migrate.TransfersColumns {
		if c.Name == transfer.FieldKind {
			return c.Enums
		}
	}
	t.Fatal("transfers has no kind column")
	return nil
}

// TestTransferKindsTable: every kind of the schema has its entry in
// transferKinds (and no entry names a kind the schema lacks), each entry
// says what the gas ledger calls it and which parties it has; and the
// parties each kind accepts when recorded are those the backfill rule
// (transferKindOfParties) gives that kind, over every combination of
// parties, so a row recorded today and one backfilled never disagree.
func TestTransferKindsTable(t *testing.T) {
	kinds := schemaTransferKinds(t)
	require.NotEmpty(t, kinds)
	for _, k := range kinds {
		entry, ok := transferKinds[transfer.Kind(k)]
		require.True(t, ok, "kind %s has no entry in transferKinds", k)
		require.NotEmpty(t, entry.gasPurpose, "kind %s: gas purpose", k)
		require.NotNil(t, entry.recordable, "kind %s: recordable", k)
		require.NoError(t, transfer.KindValidator(transfer.Kind(k)))
	}
	for k := range transferKinds {
		require.Contains(t, kinds, string(k), "an entry for a kind the schema does not have")
	}

	id := uuid.New()
	accepted := map[transfer.Kind]int{}
	for _, fromUser := range []bool{false, true} {
		for _, toAgent := range []bool{false, true} {
			for _, toUser := range []bool{false, true} {
				if toAgent && toUser {
					continue // one recipient at most (holder)
				}
				for _, checkout := range []bool{false, true} {
					for _, internal := range []bool{false, true} {
						o := &outgoing{internal: internal}
						if fromUser {
							o.from.userID = &id
						} else {
							o.from.agentID = &id
						}
						if toAgent {
							o.to.agentID = &id
						}
						if toUser {
							o.to.userID = &id
						}
						if checkout {
							o.checkoutSessionID = &id
						}
						var fits []transfer.Kind
						for k, entry := range transferKinds {
							if entry.recordable(o) {
								fits = append(fits, k)
							}
						}
						if len(fits) == 0 {
							continue // recorded as no kind: refused
						}
						// The parties alone do not tell a card reservation
						// from a send of no party; nothing records the latter.
						// An internal payment is told apart by its path, not
						// its parties (internalSettlement); none predates the
						// backfill.
						want := transferKindOfParties(fromUser, toAgent, toUser, checkout)
						if internal && !fromUser && !toAgent && !toUser && checkout {
							want = transfer.KindInternalPayment
						}
						require.Equal(t, []transfer.Kind{want}, fits,
							"parties from_user=%v to_agent=%v to_user=%v checkout=%v internal=%v", fromUser, toAgent, toUser, checkout, internal)
						if !internal || want == transfer.KindInternalPayment {
							accepted[want]++
						}
					}
				}
			}
		}
	}
	for _, k := range kinds {
		require.Equal(t, 1, accepted[transfer.Kind(k)], "kind %s is recordable with exactly one set of parties", k)
	}
}

// TestTransferKindBackfillRule: the SQL the transfer_kind migration
// backfilled older rows with is transferKindBackfill, and it says what
// transferKindOfParties says, on this database engine, for every
// combination of parties.
func TestTransferKindBackfillRule(t *testing.T) {
	for _, dir := range []string{"sqlite", "postgres"} {
		files, err := fs.Glob(migrations.FS, dir+"/*_transfer_kind.sql")
		require.NoError(t, err)
		require.Len(t, files, 1, "%s: the transfer_kind migration", dir)
		body, err := fs.ReadFile(migrations.FS, files[0])
		require.NoError(t, err)
		require.Contains(t, string(body), "UPDATE transfers SET kind = "+transferKindBackfill+";", "%s: the backfill is transferKindBackfill", dir)
	}

	db := testdb.OpenEmpty(t)
	ctx := context.Background()
	col := func(set bool) string {
		if set {
			return "'" + uuid.NewString() + "'"
		}
		return "NULL"
	}
	for _, fromUser := range []bool{false, true} {
		for _, toAgent := range []bool{false, true} {
			for _, toUser := range []bool{false, true} {
				for _, checkout := range []bool{false, true} {
					q := "SELECT " + transferKindBackfill + " FROM (SELECT " +
						col(fromUser) + " AS from_user_id, " + col(toAgent) + " AS to_agent_id, " +
						col(toUser) + " AS to_user_id, " + col(checkout) + " AS checkout_session_id) AS transfers"
					var got string
					require.NoError(t, db.SQL.QueryRowContext(ctx, q).Scan(&got), q)
					require.Equal(t, string(transferKindOfParties(fromUser, toAgent, toUser, checkout)), got, q)
				}
			}
		}
	}
}

// requireTransferKind checks that a transfer recorded by the service has
// the kind want, and that the backfill rule, run on its row, gives the
// same: what recording sets is what the migration derived.
func requireTransferKind(t testing.TB, db *store.DB, tr *ent.Transfer, want transfer.Kind) {
	t.Helper()
	require.Equal(t, want, tr.Kind)
	q := "SELECT " + transferKindBackfill + " FROM transfers WHERE id = ?"
	if db.Dialect == store.DialectPostgres {
		q = strings.Replace(q, "?", "$1", 1)
	}
	var derived string
	require.NoError(t, db.SQL.QueryRowContext(context.Background(), q, tr.ID).Scan(&derived))
	require.Equal(t, string(want), derived, "the backfill rule on the recorded row")
}

// TestTransferKindGasPurposes: the gas tally calls each kind's amount leg
// what docs/money.md's Gas table says, by the SQL it runs
// (gasPurposeOfKind) on this database engine.
func TestTransferKindGasPurposes(t *testing.T) {
	want := map[transfer.Kind]string{
		transfer.KindSend:            GasPurposeSend,
		transfer.KindSendToUser:      GasPurposeSend,
		transfer.KindWithdrawal:      GasPurposeWithdrawal,
		transfer.KindCheckoutPayment: GasPurposeAgentPay,
		transfer.KindCardReservation: GasPurposeCardReserve,
		// Never tallied (no transaction; the tally skips the kind), named
		// as the payment it is.
		transfer.KindInternalPayment: GasPurposeAgentPay,
	}
	require.Len(t, want, len(schemaTransferKinds(t)), "a kind of the schema without its purpose here")
	db := testdb.OpenEmpty(t)
	for k, purpose := range want {
		var got string
		require.NoError(t, db.SQL.QueryRowContext(context.Background(),
			"SELECT "+gasPurposeOfKind()+" FROM (SELECT '"+string(k)+"' AS kind) AS t").Scan(&got))
		require.Equal(t, purpose, got, "kind %s", k)
	}
}
