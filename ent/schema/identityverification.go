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

// IdentityVerification is one run of a person through an identity
// provider's hosted flow (identity.go): the provider's reference, the
// state it reported and when; never documents or personal data.
type IdentityVerification struct {
	ent.Schema
}

// Annotations of the IdentityVerification.
func (IdentityVerification) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the IdentityVerification.
func (IdentityVerification) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the IdentityVerification.
func (IdentityVerification) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		field.String("provider").
			NotEmpty().
			MaxLen(50).
			Immutable(),
		// The provider's id of the verification: its callbacks name it.
		field.String("reference").
			NotEmpty().
			MaxLen(100).
			Immutable(),
		field.Enum("state").
			Values("pending", "requires_input", "verified", "rejected").
			Default("pending"),
		// When the provider decided the state held now (its callback's
		// time): an older callback arriving late changes nothing.
		field.Time("state_at").
			Optional().
			Nillable(),
		field.Time("completed_at").
			Optional().
			Nillable(),
	}
}

// Edges of the IdentityVerification.
func (IdentityVerification) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("user", User.Type).
			Ref("identity_verifications").
			Field("user_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the IdentityVerification.
func (IdentityVerification) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("provider", "reference").Unique(),
		index.Fields("user_id", "created_at"),
	}
}
