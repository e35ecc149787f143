package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// GasSpend is what one transaction the treasury paid for cost it, read
// from the chain once the transaction is included (agentpay's gas.go): the
// gas ledger behind the treasury's gas report.
type GasSpend struct {
	ent.Schema
}

// Annotations of the GasSpend: operators read the gas ledger through the
// treasury report, not as GraphQL nodes.
func (GasSpend) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the GasSpend.
func (GasSpend) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the GasSpend.
func (GasSpend) Fields() []ent.Field {
	return []ent.Field{
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.Enum("mode").
			Values("live", "test").
			Immutable(),
		field.String("tx_hash").
			NotEmpty().
			Immutable(),
		// Why the treasury paid: send, send_fee, withdrawal, agent_pay,
		// card_reserve, card_return, sweep, payout, refund, close.
		field.String("purpose").
			NotEmpty().
			Immutable(),
		// Fee and rent in the chain's smallest native unit (wei, lamports).
		// One transaction's fee fits int64 (up to 9.2 ETH); sums are taken
		// in two exact parts (gas.go), never in one int64.
		field.Int64("fee").
			NonNegative().
			Immutable(),
		field.Int64("rent").
			Default(0).
			Immutable(),
		field.Int32("decimals").
			Immutable(),
	}
}

// Indexes of the GasSpend.
func (GasSpend) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("chain", "tx_hash").Unique(),
		index.Fields("mode", "chain"),
	}
}
