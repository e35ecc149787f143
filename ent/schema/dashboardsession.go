package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// DashboardSession is the credential the merchant dashboard calls the
// GraphQL API with (dashboardsessions.go): one member's access to one
// merchant in one mode, opened from a signed-in browser session and ending
// with it. Its token is shown once and stored only hashed.
type DashboardSession struct {
	ent.Schema
}

// Annotations of the DashboardSession.
func (DashboardSession) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the DashboardSession.
func (DashboardSession) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the DashboardSession.
func (DashboardSession) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		// The browser session it was opened from: revoking or expiring that
		// ends this one too.
		field.UUID("browser_session_id", uuid.UUID{}).
			Immutable(),
		field.Enum("mode").
			Values("live", "test").
			Immutable(),
		// SHA-256 of the token (vault.HashSecret).
		field.Bytes("token_hash").
			Unique().
			Immutable().
			Sensitive(),
		field.Time("expires_at").
			Immutable(),
		field.Time("revoked_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the DashboardSession.
func (DashboardSession) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("browser_session_id"),
		index.Fields("user_id", "merchant_id"),
	}
}
