package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// SpendingPolicy is what a paired human set on an agent's spending:
// spendingpolicies.go holds the rule that reads it.
type SpendingPolicy struct {
	ent.Schema
}

// Annotations of the SpendingPolicy.
func (SpendingPolicy) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the SpendingPolicy.
func (SpendingPolicy) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the SpendingPolicy.
func (SpendingPolicy) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).
			Immutable(),
		// The human who set it (one with an approved pairing).
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		field.Int64("approval_threshold").
			Optional().
			Nillable().
			Comment("USDC base units: above it an operation waits for approval"),
		field.Int64("per_payment_cap").
			Optional().
			Nillable().
			Comment("USDC base units, below the tier's per-send limit"),
		field.Int64("daily_cap").
			Optional().
			Nillable().
			Comment("USDC base units, below the tier's daily limit"),
		// Recipients a send may pay without approval: agent or user
		// usernames, user or agent ids, wallet addresses. Empty: no list.
		field.Strings("allowed_recipients").
			Optional(),
		// What would wait for approval is refused instead.
		field.Bool("deny_by_default").
			Default(false),
	}
}

// Indexes of the SpendingPolicy.
func (SpendingPolicy) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "user_id").Unique(),
	}
}
