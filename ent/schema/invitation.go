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

// Invitation is an agent's e-mailed invitation of a person
// (invitations.go): its link {app_url}/invite/<code> lets the person sign up
// or sign in and accept, which makes an approved pairing.
type Invitation struct {
	ent.Schema
}

// Annotations of the Invitation.
func (Invitation) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the Invitation.
func (Invitation) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Invitation.
func (Invitation) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).
			Immutable(),
		// Lower-cased (NormalizeEmail).
		field.String("email").
			NotEmpty().
			MaxLen(254).
			Immutable(),
		// The UTC day it was sent (2006-01-02): one invitation per address
		// per agent per day, kept by the unique index below.
		field.String("day").
			Immutable(),
		// SHA-256 of the link's token (vault.InvitationToken), which is
		// shown only in the e-mail and the answer: the link signs its
		// opener up with the address, so a leaked table must not hold it.
		field.Bytes("token_hash").
			Unique().
			Immutable().
			Sensitive(),
		field.Time("expires_at").
			Immutable(),
		field.Time("accepted_at").
			Optional().
			Nillable(),
		field.UUID("accepted_by", uuid.UUID{}).
			Optional().
			Nillable(),
		// Declined from the e-mailed link: it cannot be accepted, and the
		// agent cannot invite the address again (a mail opt-out).
		field.Time("declined_at").
			Optional().
			Nillable(),
	}
}

// Edges of the Invitation.
func (Invitation) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("agent", Agent.Type).
			Ref("invitations").
			Field("agent_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the Invitation.
func (Invitation) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "email", "day").Unique(),
	}
}
