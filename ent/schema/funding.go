package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Funding is USDC that reached an address from outside the service's own
// transfers, as far as the service sent or saw it: the devnet faucet's
// payments (agentpay dev, tests) and the treasury's starting liquidity.
// The books (agentpay's books.go) count it as an inflow of the address it
// paid, so an outside payment the service knows of is explained and one it
// does not know of is a difference.
type Funding struct {
	ent.Schema
}

// Annotations of the Funding: internal, read by the books only.
func (Funding) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Funding.
func (Funding) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Funding.
func (Funding) Fields() []ent.Field {
	return []ent.Field{
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.Enum("mode").
			Values("live", "test").
			Immutable(),
		// The address paid, in the chain's canonical text form.
		field.String("address").
			NotEmpty().
			Immutable(),
		// USDC base units.
		field.Int64("amount").
			Positive().
			Immutable(),
		field.String("tx_hash").
			NotEmpty().
			Immutable(),
		// Who sent it: faucet (the devnet faucet), treasury_liquidity.
		field.String("source").
			NotEmpty().
			Immutable(),
	}
}

// Indexes of the Funding.
func (Funding) Indexes() []ent.Index {
	return []ent.Index{
		// One transaction pays one address once: recording it twice (a
		// retried record) keeps one row.
		index.Fields("chain", "tx_hash", "address").Unique(),
		index.Fields("mode", "chain"),
	}
}
