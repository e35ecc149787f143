package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Transfer is a USDC send from a custodial wallet, of one kind: an agent's
// (from_agent_id set) to another agent (to_agent_id set) or to a human
// user's custodial wallet (to_user_id set), a human user's withdrawal
// (from_user_id set) to an external address (neither to_ set), an agent's
// payment of a checkout session (checkout_session_id set) or its card
// reservation (paying the treasury). Exactly one sender is set (a check
// constraint says so).
type Transfer struct {
	ent.Schema
}

// Annotations of the Transfer.
func (Transfer) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entsql.Checks(map[string]string{
			"transfer_one_sender": "((from_agent_id IS NULL) <> (from_user_id IS NULL))",
		}),
	}
}

// Mixin of the Transfer.
func (Transfer) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Transfer.
func (Transfer) Fields() []ent.Field {
	return []ent.Field{
		// What the transfer is for, set when it is recorded: its rules
		// (fee leg, what completion and failure do, what the books and
		// the gas ledger call it) are its entry in transfer_kinds.go.
		// Not a GraphQL field: an agent sees its sends, not their kinds.
		field.Enum("kind").
			Values("send", "send_to_user", "withdrawal", "checkout_payment", "card_reservation", "internal_payment").
			Immutable().
			Annotations(entgql.Skip()),
		field.UUID("from_agent_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		// A user's withdrawal: not a GraphQL field, so agents never see a
		// user id (no agent takes part in a withdrawal anyway).
		field.UUID("from_user_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
		field.UUID("to_agent_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.UUID("to_user_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
		// An agent's payment of a checkout session (agentcheckout.go): the
		// transfer pays the session's deposit address (to_address), and its
		// completion records the session's payment. Not a GraphQL field:
		// the agent sees the session by its external id on the answer.
		field.UUID("checkout_session_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.String("token").
			Default("USDC").
			Immutable(),
		field.String("from_address").
			NotEmpty().
			Immutable(),
		field.String("to_address").
			NotEmpty().
			Immutable(),
		// Amounts in token base units (see money.go): the sender is debited
		// amount, the recipient receives net = amount - fee, the treasury fee.
		field.Int64("amount").
			NonNegative().
			Immutable().
			Annotations(baseUnits),
		field.Int64("fee").
			NonNegative().
			Default(0).
			Immutable().
			Annotations(baseUnits),
		field.Int64("net").
			NonNegative().
			Immutable().
			Annotations(baseUnits),
		field.String("tx_hash").
			Optional(),
		field.Enum("status").
			Values("pending", "submitted", "completed", "failed").
			Default("pending"),
		// ref makes the on-chain transfer idempotent: on EVM it is the
		// EIP-3009 authorization nonce (32 bytes), so a retried submission can
		// never pay twice; on Solana a random 32-byte reference.
		field.Bytes("ref").
			Immutable().
			Unique().
			Annotations(entgql.Skip()),
		// The treasury fee travels as its own on-chain transfer with its own
		// idempotency reference, so both legs can be resumed after a crash.
		field.Bytes("fee_ref").
			Optional().
			Immutable().
			Unique().
			Annotations(entgql.Skip()),
		field.String("fee_tx_hash").
			Optional(),
		field.String("memo").
			Optional().
			MaxLen(500),
		field.String("error").
			Optional(),
		field.Time("submitted_at").
			Optional().
			Nillable(),
		field.Time("completed_at").
			Optional().
			Nillable(),
	}
}

// Edges of the Transfer.
func (Transfer) Edges() []ent.Edge {
	return []ent.Edge{
		// Not GraphQL edges: the agents at either end of a transfer are
		// other accounts, shown only through their public profile
		// (graph/agents.graphql), never as the owner's Agent node.
		edge.From("from_agent", Agent.Type).
			Ref("sent_transfers").
			Field("from_agent_id").
			Unique().
			Immutable().
			Annotations(entgql.Skip()),
		edge.From("to_agent", Agent.Type).
			Ref("received_transfers").
			Field("to_agent_id").
			Unique().
			Immutable().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the Transfer.
func (Transfer) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("from_agent_id", "created_at"),
		index.Fields("to_agent_id", "created_at"),
		index.Fields("to_user_id", "created_at"),
		index.Fields("from_user_id", "created_at"),
		// In-flight sends (pending/submitted) are summed per sender when the
		// available balance is checked, and resumed by the worker.
		index.Fields("status", "from_agent_id"),
		index.Fields("chain", "tx_hash"),
		// One agent payment in flight or done per session (agentcheckout.go).
		index.Fields("checkout_session_id"),
	}
}
