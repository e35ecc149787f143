package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// DepositAddress is an address derived for one session on one chain. The
// (chain_family, derivation_index) pair re-derives its key from the master
// seed, so the deposit can always be swept.
type DepositAddress struct {
	ent.Schema
}

// Mixin of the DepositAddress.
func (DepositAddress) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the DepositAddress.
func (DepositAddress) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("session_id", uuid.UUID{}).
			Immutable(),
		field.String("chain").
			NotEmpty().
			Immutable(),
		// "evm" or "solana": one derivation path per family, so indexes are
		// unique per family, not per chain.
		field.String("chain_family").
			NotEmpty().
			Immutable(),
		field.String("address").
			NotEmpty().
			Immutable(),
		field.Int64("derivation_index").
			NonNegative().
			Immutable(),
		field.Bool("swept").
			Default(false),
		field.String("sweep_tx_hash").
			Optional(),
		// When the address's session ended (confirmed, expired or
		// cancelled), copied from the session once it has; NULL before. The
		// deposit scan watches the address until the late-payment window
		// after it has passed (deposits.go).
		field.Time("session_ended_at").
			Optional().
			Nillable(),
	}
}

// Edges of the DepositAddress.
func (DepositAddress) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("session", CheckoutSession.Type).
			Ref("deposit_addresses").
			Field("session_id").
			Unique().
			Required().
			Immutable(),
		edge.To("payments", Payment.Type),
	}
}

// Indexes of the DepositAddress.
func (DepositAddress) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("chain_family", "derivation_index").Unique(),
		// The watcher matches incoming transfers by (chain, address).
		index.Fields("chain", "address").Unique(),
		index.Fields("session_id"),
		// The deposit scan lists a chain's addresses still watched: those
		// of open sessions (NULL) and of recently ended ones.
		index.Fields("chain", "session_ended_at"),
	}
}
