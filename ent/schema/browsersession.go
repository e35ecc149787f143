package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// BrowserSession is a signed-in browser of a human user
// (browsersessions.go): its token lives in a cookie and here only hashed.
type BrowserSession struct {
	ent.Schema
}

// Annotations of the BrowserSession.
func (BrowserSession) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the BrowserSession.
func (BrowserSession) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the BrowserSession.
func (BrowserSession) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		// SHA-256 of the cookie's token.
		field.Bytes("token_hash").
			Unique().
			Immutable().
			Sensitive(),
		field.Time("expires_at"),
		field.Time("revoked_at").
			Optional().
			Nillable(),
		// What the session list shows of the browser (truncated).
		field.String("user_agent").
			MaxLen(200).
			Default(""),
	}
}

// Indexes of the BrowserSession.
func (BrowserSession) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("user_id", "created_at"),
	}
}
