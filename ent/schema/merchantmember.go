package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// MerchantMember is a person who manages a merchant in the dashboard
// (merchantmembers.go): invited by e-mail, accepted when an account with
// that verified e-mail signs in. The merchant's contact e-mail is its
// owner without an invitation (the row is made on first sign-in).
type MerchantMember struct {
	ent.Schema
}

// Annotations of the MerchantMember.
func (MerchantMember) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the MerchantMember.
func (MerchantMember) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the MerchantMember.
func (MerchantMember) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		// The account that accepted; NULL until then.
		field.UUID("user_id", uuid.UUID{}).
			Optional().
			Nillable(),
		// Lower-cased (NormalizeEmail).
		field.String("email").
			NotEmpty().
			MaxLen(254).
			Immutable(),
		field.Enum("role").
			Values("owner", "read_only"),
		// The user who invited; NULL for the contact e-mail's own row.
		field.UUID("invited_by", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.Time("accepted_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the MerchantMember.
func (MerchantMember) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "email").Unique(),
		index.Fields("user_id"),
		index.Fields("email"),
	}
}
