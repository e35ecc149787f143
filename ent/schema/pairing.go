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

// Pairing links an agent with a human user: requested by the agent (or made
// approved at once by the human accepting the agent's invitation), decided
// by the human. pairings.go holds the states and who may move them.
type Pairing struct {
	ent.Schema
}

// Annotations of the Pairing.
func (Pairing) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the Pairing.
func (Pairing) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Pairing.
func (Pairing) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).
			Immutable(),
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		// expired is never stored: a pending (or awaiting_consent) pairing
		// past expires_at reads as expired (pairingStatus).
		// awaiting_consent: the human accepted, but the agent has another
		// human already, whose consent it waits for (pairings.go).
		field.Enum("status").
			Values("pending", "approved", "denied", "revoked", "awaiting_consent"),
		field.String("message").
			MaxLen(2000).
			Default(""),
		field.Time("decided_at").
			Optional().
			Nillable(),
		// When a pending request lapses; nil once decided.
		field.Time("expires_at").
			Optional().
			Nillable(),
		// The invitation whose acceptance made it, if any.
		field.UUID("invitation_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
	}
}

// Edges of the Pairing.
func (Pairing) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("agent", Agent.Type).
			Ref("pairings").
			Field("agent_id").
			Unique().
			Required().
			Immutable(),
		edge.From("user", User.Type).
			Ref("pairings").
			Field("user_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the Pairing.
func (Pairing) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "created_at"),
		index.Fields("user_id", "created_at"),
		index.Fields("agent_id", "user_id", "status"),
	}
}
