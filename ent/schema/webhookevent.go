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

// WebhookEvent is an event for a merchant, written in the same transaction as
// the state change that caused it.
type WebhookEvent struct {
	ent.Schema
}

// Annotations of the WebhookEvent.
func (WebhookEvent) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
	}
}

// Mixin of the WebhookEvent.
func (WebhookEvent) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the WebhookEvent.
func (WebhookEvent) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.UUID("session_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		// payment.detected, payment.confirmed, session.expired, ... (spec 6.2).
		// A string, not an enum: the dotted names are not Go identifiers and
		// new kinds should not need a migration.
		field.String("event_type").
			NotEmpty().
			Immutable(),
		// The exact JSON body sent (and signed): every delivery and redelivery
		// sends these bytes unchanged.
		field.Bytes("payload").
			Immutable().
			Annotations(entgql.Skip()),
		field.Bool("livemode").
			Immutable(),
	}
}

// Edges of the WebhookEvent.
func (WebhookEvent) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("merchant", Merchant.Type).
			Ref("webhook_events").
			Field("merchant_id").
			Unique().
			Required().
			Immutable(),
		edge.From("session", CheckoutSession.Type).
			Ref("webhook_events").
			Field("session_id").
			Unique().
			Immutable(),
		edge.To("deliveries", WebhookDelivery.Type),
	}
}

// Indexes of the WebhookEvent.
func (WebhookEvent) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "livemode", "created_at"),
		index.Fields("session_id"),
		// The retention job finds the oldest events (webhook_retention.go).
		index.Fields("created_at"),
	}
}
