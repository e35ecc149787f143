package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// MailOptOut is an address that wants no more mail from agents
// (agentmail.go): unsubscribed (from every agent, by a mail's unsubscribe
// link) or declined (one agent's invitation). Invitations and pairing
// requests are not mailed to it.
type MailOptOut struct {
	ent.Schema
}

// Annotations keep the opt-outs out of GraphQL.
func (MailOptOut) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the MailOptOut.
func (MailOptOut) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the MailOptOut.
func (MailOptOut) Fields() []ent.Field {
	return []ent.Field{
		// Lower-cased (NormalizeEmail).
		field.String("email").
			NotEmpty().
			MaxLen(254).
			Immutable(),
		// The agent whose invitation was declined; NULL: every agent.
		field.UUID("agent_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.Enum("reason").
			Values("unsubscribed", "declined").
			Immutable(),
	}
}

// Indexes of the MailOptOut.
func (MailOptOut) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("email"),
	}
}
