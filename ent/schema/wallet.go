package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Wallet is an address of an agent or of a human user on one chain:
// custodial (we hold the key, encrypted) or external (the agent proved
// control by signature). Exactly one of agent_id and user_id is set.
type Wallet struct {
	ent.Schema
}

// Mixin of the Wallet.
func (Wallet) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Wallet.
func (Wallet) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).
			Optional().
			Immutable(),
		field.UUID("user_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable().
			Annotations(entgql.Skip()),
		field.String("chain").
			NotEmpty().
			Immutable(),
		// Stored in the chain's canonical text form (EIP-55 checksummed hex for
		// EVM, base58 for Solana) so the (chain, address) unique index holds.
		field.String("address").
			NotEmpty().
			Immutable(),
		// AES-256-GCM ciphertext of the private key; nil for external wallets.
		field.Bytes("encrypted_key").
			Optional().
			Sensitive().
			Annotations(entgql.Skip()),
		field.Enum("kind").
			Values("custodial", "external").
			Default("custodial"),
		field.Bool("verified").
			Default(false),
	}
}

// Edges of the Wallet.
func (Wallet) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("agent", Agent.Type).
			Ref("wallets").
			Field("agent_id").
			Unique().
			Immutable(),
		edge.From("user", User.Type).
			Ref("wallets").
			Field("user_id").
			Unique().
			Immutable().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the Wallet.
func (Wallet) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("chain", "address").Unique(),
		index.Fields("agent_id", "chain"),
		index.Fields("user_id", "chain"),
	}
}
