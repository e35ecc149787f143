package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// SignatureChallenge is a message handed out for an EIP-712 signature
// (advanced registration, external wallet verification). It can be used once
// and only before it expires, so a captured signature cannot be replayed.
type SignatureChallenge struct {
	ent.Schema
}

// Mixin of the SignatureChallenge.
func (SignatureChallenge) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the SignatureChallenge.
func (SignatureChallenge) Fields() []ent.Field {
	return []ent.Field{
		field.Enum("purpose").
			Values("register", "verify_wallet").
			Immutable(),
		// Random, unique; part of the signed message.
		field.String("nonce").
			NotEmpty().
			Unique().
			Immutable(),
		field.String("username").
			Optional().
			Immutable(),
		field.UUID("agent_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.String("wallet_address").
			NotEmpty().
			Immutable(),
		field.String("chain").
			Optional().
			Immutable(),
		field.Time("expires_at").
			Immutable(),
		field.Time("used_at").
			Optional().
			Nillable(),
		// Who asked for the message: the client's IP address. A signature
		// is tried first against its requester's newest messages, so
		// nobody else can push a message out of that window.
		field.String("requester").
			Default("").
			Immutable(),
	}
}

// Indexes of the SignatureChallenge.
func (SignatureChallenge) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("wallet_address", "purpose"),
		index.Fields("wallet_address", "requester", "created_at"),
	}
}

// Annotations keep challenges out of GraphQL.
func (SignatureChallenge) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}
