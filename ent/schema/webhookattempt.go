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

// WebhookAttempt is one HTTP try of a delivery, kept for the merchant to see.
type WebhookAttempt struct {
	ent.Schema
}

// Annotations of the WebhookAttempt.
func (WebhookAttempt) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
	}
}

// Mixin of the WebhookAttempt.
func (WebhookAttempt) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the WebhookAttempt.
func (WebhookAttempt) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("delivery_id", uuid.UUID{}).
			Immutable(),
		// 0 when no response was received (timeout, connection refused).
		// GraphQL shows it (and error) as the REST API does, null for none
		// (graph/merchants.graphql).
		field.Int("status_code").
			Default(0).
			Immutable().
			Annotations(entgql.Skip(entgql.SkipType)),
		field.Int64("duration_ms").
			NonNegative().
			Immutable(),
		field.String("error").
			Optional().
			Immutable().
			Annotations(entgql.Skip(entgql.SkipType)),
		field.Time("at").
			Default(nowUTC).
			Immutable(),
	}
}

// Edges of the WebhookAttempt.
func (WebhookAttempt) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("delivery", WebhookDelivery.Type).
			Ref("attempt_log").
			Field("delivery_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the WebhookAttempt.
func (WebhookAttempt) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("delivery_id", "at"),
	}
}
