package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// LoginToken is an e-mailed sign-in link's token (signin.go): single use,
// valid for a short time, stored hashed.
type LoginToken struct {
	ent.Schema
}

// Annotations of the LoginToken.
func (LoginToken) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the LoginToken.
func (LoginToken) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the LoginToken.
func (LoginToken) Fields() []ent.Field {
	return []ent.Field{
		// Lower-cased (NormalizeEmail): the address the link was sent to,
		// which opening it proves.
		field.String("email").
			NotEmpty().
			MaxLen(254).
			Immutable(),
		// SHA-256 of the link's token.
		field.Bytes("token_hash").
			Unique().
			Immutable().
			Sensitive(),
		field.Time("expires_at").
			Immutable(),
		field.Time("used_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the LoginToken.
func (LoginToken) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("expires_at"),
	}
}
