package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// RateLimitCounter counts requests of one key (an agent key hash, a client
// IP) in one fixed window, shared by every API instance on PostgreSQL.
// Rows past their window are deleted by the limiter.
type RateLimitCounter struct {
	ent.Schema
}

// Fields of the RateLimitCounter.
func (RateLimitCounter) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		// scope:key, e.g. "agent:<uuid>:minute" or "ip:1.2.3.4:register".
		field.String("key").
			NotEmpty().
			MaxLen(200),
		// Start of the window, Unix seconds.
		field.Int64("window_start"),
		field.Int("count").
			Default(0),
		// When the row may be deleted, Unix seconds.
		field.Int64("expires_at"),
	}
}

// Indexes of the RateLimitCounter.
func (RateLimitCounter) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("key", "window_start").Unique(),
		index.Fields("expires_at"),
	}
}

// Annotations keep the counters out of GraphQL.
func (RateLimitCounter) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}
