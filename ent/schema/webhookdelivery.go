package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// WebhookDelivery is the sending of one event to one URL, with its retries.
// A merchant's redelivery creates a new delivery of the same event.
type WebhookDelivery struct {
	ent.Schema
}

// Mixin of the WebhookDelivery.
func (WebhookDelivery) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the WebhookDelivery.
func (WebhookDelivery) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("event_id", uuid.UUID{}).
			Immutable(),
		// The merchant's webhook_url when the delivery was created; its
		// tries go to the URL of the moment (webhookdelivery.go).
		field.String("url").
			Immutable(),
		field.Enum("status").
			Values("pending", "succeeded", "failed").
			Default("pending"),
		field.Int("attempts").
			NonNegative().
			Default(0),
		field.Time("next_attempt_at").
			Optional().
			Nillable(),
		field.Time("last_attempt_at").
			Optional().
			Nillable(),
		field.Time("completed_at").
			Optional().
			Nillable(),
	}
}

// Edges of the WebhookDelivery.
func (WebhookDelivery) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("event", WebhookEvent.Type).
			Ref("deliveries").
			Field("event_id").
			Unique().
			Required().
			Immutable(),
		edge.To("attempt_log", WebhookAttempt.Type),
	}
}

// Indexes of the WebhookDelivery.
func (WebhookDelivery) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("event_id"),
		index.Fields("status", "next_attempt_at"),
	}
}
