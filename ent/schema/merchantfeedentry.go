package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// MerchantFeedEntry is one line of a merchant's live feed
// (merchantfeed.go): an event recorded, or one try of delivering it.
// Written in the transaction of what it reports; its id is a sequence, so
// "after" is a cursor, and the merchantEvents subscription pushes it.
type MerchantFeedEntry struct {
	ent.Schema
}

// Annotations of the MerchantFeedEntry.
func (MerchantFeedEntry) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Fields of the MerchantFeedEntry.
func (MerchantFeedEntry) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Immutable(),
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.Bool("livemode").
			Immutable(),
		field.UUID("event_id", uuid.UUID{}).
			Immutable(),
		// "event" or "delivery_attempt".
		field.String("kind").
			NotEmpty().
			Immutable(),
		// A delivery attempt's snapshot as JSON (merchantfeed.go); "{}" for
		// an event, whose data is its payload's.
		field.Text("data").
			Immutable(),
		field.Time("created_at").
			Default(nowUTC).
			Immutable(),
	}
}

// Indexes of the MerchantFeedEntry.
func (MerchantFeedEntry) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "livemode", "id"),
		// The retention job deletes an event's lines with it
		// (webhook_retention.go).
		index.Fields("event_id"),
	}
}
