package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/mixin"
	"github.com/google/uuid"
)

// BaseMixin gives every entity a random UUID primary key and created_at /
// updated_at timestamps. UUIDs rather than serial ids: they are safe to show in
// URLs and events, can be generated before the row is written (so an event or
// job can reference it in the same transaction), and are globally unique, which
// GraphQL's node(id:) needs.
type BaseMixin struct {
	mixin.Schema
}

// Fields of the BaseMixin.
func (BaseMixin) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).
			Default(uuid.New).
			Immutable(),
		field.Time("created_at").
			Default(nowUTC).
			Immutable().
			Annotations(entgql.OrderField("CREATED_AT")),
		field.Time("updated_at").
			Default(nowUTC).
			UpdateDefault(nowUTC),
	}
}

// nowUTC is the default of every timestamp. UTC always: SQLite stores times
// as text and compares them as strings, which orders correctly only when all
// values share one offset. Service code should likewise write UTC times.
func nowUTC() time.Time {
	return time.Now().UTC()
}
