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

// IdempotencyKey is a caller's Idempotency-Key on a money-moving request:
// claimed before the request runs, linked to the transfer it records in
// that transfer's own transaction, and holding the answer once there is
// one, so a retry with the same key answers it instead of moving money
// again (the rules: internal/idempotency).
type IdempotencyKey struct {
	ent.Schema
}

// Mixin of the IdempotencyKey.
func (IdempotencyKey) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the IdempotencyKey.
func (IdempotencyKey) Fields() []ent.Field {
	return []ent.Field{
		// Whose key it is ("agent:<uuid>", "merchant:<uuid>:<mode>"): two
		// callers' equal keys are unrelated.
		field.String("scope").
			NotEmpty().
			MaxLen(100).
			Immutable(),
		field.String("key").
			NotEmpty().
			MaxLen(255).
			Immutable(),
		// The operation ("send") and the SHA-256 of the request's canonical
		// form: the same key on another request is refused.
		field.String("operation").
			NotEmpty().
			MaxLen(50).
			Immutable(),
		field.Bytes("fingerprint").
			Immutable(),
		field.Enum("state").
			Values("in_flight", "done").
			Default("in_flight"),
		// attempt fences the request that holds the claim: a retry that
		// takes over an abandoned claim increments it, and the earlier
		// request can then neither link a transfer nor record an answer.
		field.Int("attempt").
			Default(1),
		// While in flight, the claim is the holder's until then; after it,
		// a retry may take it over (or answer from the linked transfer).
		field.Time("locked_until"),
		// The key is kept (and answers replays) until then; afterwards it
		// may be used again.
		field.Time("expires_at"),
		// The transfer the request recorded, set in the transfer's own
		// transaction.
		field.UUID("transfer_id", uuid.UUID{}).
			Optional().
			Nillable(),
		// Once done, the answer as JSON: the operation's own (answer), or
		// the refusal it gave (refusal: the error's kind and text), never
		// both (internal/idempotency).
		field.Text("answer").
			Optional().
			Nillable(),
		field.Text("refusal").
			Optional().
			Nillable(),
	}
}

// Edges of the IdempotencyKey.
func (IdempotencyKey) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("transfer", Transfer.Type).
			Field("transfer_id").
			Unique(),
	}
}

// Indexes of the IdempotencyKey.
func (IdempotencyKey) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("scope", "key").Unique(),
		// Pruning deletes by expiry.
		index.Fields("expires_at"),
	}
}

// Annotations keep the keys out of GraphQL.
func (IdempotencyKey) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}
