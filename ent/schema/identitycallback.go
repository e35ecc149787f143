package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// IdentityCallback is a provider's callback event the service applied:
// the unique index on (provider, event_id) is what refuses a replay, on
// every instance at once.
type IdentityCallback struct {
	ent.Schema
}

// Annotations of the IdentityCallback.
func (IdentityCallback) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the IdentityCallback.
func (IdentityCallback) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the IdentityCallback.
func (IdentityCallback) Fields() []ent.Field {
	return []ent.Field{
		field.String("provider").
			NotEmpty().
			MaxLen(50).
			Immutable(),
		field.String("event_id").
			NotEmpty().
			MaxLen(100).
			Immutable(),
		field.String("reference").
			MaxLen(100).
			Immutable(),
		field.String("state").
			MaxLen(20).
			Immutable(),
	}
}

// Indexes of the IdentityCallback.
func (IdentityCallback) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("provider", "event_id").Unique(),
	}
}
