package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Refund returns all or part of a payment to its payer (or an address the
// merchant gives), out of the treasury on the payment's chain
// (docs/money.md#refunds).
type Refund struct {
	ent.Schema
}

// Annotations of the Refund.
func (Refund) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
	}
}

// Mixin of the Refund.
func (Refund) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Refund.
func (Refund) Fields() []ent.Field {
	return []ent.Field{
		field.String("external_id").
			NotEmpty().
			Unique().
			Immutable(),
		field.UUID("payment_id", uuid.UUID{}).
			Immutable(),
		field.UUID("session_id", uuid.UUID{}).
			Immutable().
			Annotations(entgql.Skip()),
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable().
			Annotations(entgql.Skip()),
		field.Bool("livemode").
			Immutable(),
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.String("token").
			Default("USDC").
			Immutable(),
		field.Int64("amount_token").
			Positive().
			Immutable().
			Annotations(baseUnits),
		usdField("amount_usd"),
		field.String("to_address").
			NotEmpty().
			Immutable(),
		field.String("reason").
			Optional().
			Immutable(),
		// pending: recorded, not yet broadcast; submitted: broadcast (or
		// about to be); completed: included on chain; failed: given up,
		// the amount is refundable again.
		field.Enum("status").
			Values("pending", "submitted", "completed", "failed").
			Default("pending"),
		field.String("tx_hash").
			Optional(),
		// Why the last attempt could not go on (treasury short, chain
		// down); cleared on success.
		field.String("error").
			Optional(),
		// How often the chain reverted the refund's transfer (a token
		// blocklist, a destination that cannot receive): at
		// MaxRefundReverts the refund fails.
		field.Int("reverts").
			NonNegative().
			Default(0).
			Annotations(entgql.Skip()),
		field.Time("completed_at").
			Optional().
			Nillable(),
		// The merchant's Idempotency-Key and the SHA-256 of the request it
		// named: the same key answers the same refund, another request under
		// it is refused.
		field.String("idempotency_key").
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
		field.String("request_hash").
			Optional().
			Immutable().
			Annotations(entgql.Skip()),
		// after_payout: the payment was already in a paid (or paying)
		// settlement batch when refunded (refunds.go).
		field.Bool("after_payout").
			Default(false).
			Immutable(),
		// reserved_token: what a refund after the payout took from the
		// merchant's unsettled payments on the chain and mode (what the
		// payout did not pay of the payment itself covers the rest), taken
		// in the refund's transaction and netted off the batch that pays
		// those payments (netted_batch_id once it is). 0 before the payout.
		field.Int64("reserved_token").
			NonNegative().
			Default(0).
			Immutable().
			Annotations(baseUnits),
		field.UUID("netted_batch_id", uuid.UUID{}).
			Optional().
			Nillable().
			Annotations(entgql.Skip()),
		// destination: payer when the refund goes to the payment's
		// from_address (the default), chosen when the merchant named
		// another address (only with its secret key: refunds.go).
		field.Enum("destination").
			Values("payer", "chosen").
			Default("payer").
			Immutable(),
		// requested_with: the credential that asked for the refund, and
		// which one (merchant_key_id: the secret key's key pair;
		// dashboard_user_id: the member behind a dashboard session). NULL
		// on refunds recorded before it was kept.
		field.Enum("requested_with").
			Values("secret_key", "dashboard_session").
			Optional().
			Nillable().
			Immutable(),
		field.UUID("merchant_key_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
		field.UUID("dashboard_user_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
	}
}

// Edges of the Refund.
func (Refund) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("payment", Payment.Type).
			Ref("refunds").
			Field("payment_id").
			Unique().
			Required().
			Immutable(),
		edge.From("netted_batch", SettlementBatch.Type).
			Ref("netted_refunds").
			Field("netted_batch_id").
			Unique().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the Refund.
func (Refund) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "livemode", "idempotency_key").Unique(),
		index.Fields("session_id"),
		index.Fields("status"),
	}
}
