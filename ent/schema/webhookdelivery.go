package schema

import (
	"entgo.io/contrib/entgql"
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
		// The delivery's River job (river_job.id), written with it, so
		// a batch that records the delivery's last try removes the job
		// in the same statement (webhooksend.RecordPostgres) and River
		// never fetches a job whose delivery is done. Null for
		// deliveries from before it existed: their jobs come back as
		// before and find the delivery done.
		// The event's merchant and mode, copied onto the delivery so a
		// batch's claim (webhooksend.Claim) reads one merchant's due
		// deliveries from an index in due order, as many as it takes,
		// instead of every due delivery of every merchant joined to its
		// event. Null only between the column's migration and its
		// backfill in the same migration.
		field.UUID("merchant_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip(entgql.SkipAll)),
		field.Bool("livemode").
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip(entgql.SkipAll)),
		field.Int64("job_id").
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip(entgql.SkipAll)),
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
		// The claim: a merchant's mode's pending deliveries by due time.
		index.Fields("merchant_id", "livemode", "status", "next_attempt_at"),
	}
}
