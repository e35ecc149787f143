package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// ACPOrderEvent is one ACP order webhook (order_create or order_update) of
// an ACP checkout session, with its delivery state: written in the
// transaction of the state change it reports, sent by the
// deliver_acp_order_event job (acp_webhooks.go).
type ACPOrderEvent struct {
	ent.Schema
}

// Mixin of the ACPOrderEvent.
func (ACPOrderEvent) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Annotations keep the ACP outbox out of GraphQL.
func (ACPOrderEvent) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Fields of the ACPOrderEvent.
func (ACPOrderEvent) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.UUID("session_id", uuid.UUID{}).
			Immutable(),
		field.Bool("livemode").
			Immutable(),
		// The session's events in order (1, 2, ...): an event is sent only
		// after the ones before it are done, and the unique index makes
		// order_create (seq 1) once per session.
		field.Int("seq").
			Positive().
			Immutable(),
		field.Enum("event_type").
			Values("order_create", "order_update").
			Immutable(),
		// The body every try sends, the full Order as it was at the change.
		field.Bytes("payload").
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
		field.Int("last_status_code").
			Optional().
			Nillable(),
		field.String("last_error").
			Optional(),
		field.Time("completed_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the ACPOrderEvent.
func (ACPOrderEvent) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("session_id", "seq").Unique(),
		index.Fields("merchant_id", "livemode", "created_at"),
		// The retention job finds the events done longest ago
		// (webhook_retention.go).
		index.Fields("completed_at"),
	}
}
