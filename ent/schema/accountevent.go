package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// AccountEvent is something an agent or a human user is told: a pairing
// requested or decided, a transfer received (accountevents.go). Written in
// the transaction of the change it reports; read as a list after an id and
// pushed live to subscribers. Its id is a sequence, so "after" is a cursor.
type AccountEvent struct {
	ent.Schema
}

// Annotations of the AccountEvent.
func (AccountEvent) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Fields of the AccountEvent.
func (AccountEvent) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Immutable(),
		// Exactly one of agent_id and user_id is set: whom it is for.
		field.UUID("agent_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.UUID("user_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.String("kind").
			NotEmpty().
			Immutable(),
		// The event's data as JSON (accountevents.go gives each kind's).
		field.Text("data").
			Immutable(),
		field.Time("created_at").
			Default(nowUTC).
			Immutable(),
	}
}

// Indexes of the AccountEvent.
func (AccountEvent) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "id"),
		index.Fields("user_id", "id"),
	}
}
