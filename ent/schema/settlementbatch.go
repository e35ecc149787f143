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

// SettlementBatch is one payout to a merchant covering every swept, counted,
// unpaid payment of one merchant on one chain in one mode, less the refunds
// made after earlier payouts (settlement.go, docs/money.md#settlement).
// Amounts are base units of the paid chain's token.
type SettlementBatch struct {
	ent.Schema
}

// Annotations of the SettlementBatch: not in GraphQL (the merchant sees it
// through settlement.completed and the payments' settlement fields).
func (SettlementBatch) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.Skip(entgql.SkipAll),
	}
}

// Mixin of the SettlementBatch.
func (SettlementBatch) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the SettlementBatch.
func (SettlementBatch) Fields() []ent.Field {
	return []ent.Field{
		field.String("external_id").
			NotEmpty().
			Unique().
			Immutable(),
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.Bool("livemode").
			Immutable(),
		// The chain the covered payments were paid (and swept) on.
		field.String("chain").
			NotEmpty().
			Immutable(),
		// The batch's place in its merchant, chain and mode's sequence,
		// from 1. Unique: two runs forming a batch at once cannot both
		// commit, and a batch is formed only once the previous one is
		// completed, so one batch per merchant, chain and mode is open.
		field.Int("seq").
			Positive().
			Immutable(),
		// pending: formed, payout not started; submitted: the payout may
		// have been broadcast (or asked of the provider); completed: paid,
		// or nothing to pay (net zero, carried over).
		field.Enum("status").
			Values("pending", "submitted", "completed").
			Default("pending"),
		// The payments' amounts less their refunds before the payout, the
		// fee on them, the refunds after an earlier payout netted here, the
		// deficit a previous batch carried over, and what is paid:
		// net = gross - fee - refunds_netted - carried_in when positive (else 0
		// and carried_out the deficit).
		field.Int64("gross").NonNegative().Immutable(),
		field.Int64("fee").NonNegative().Immutable(),
		field.Int64("refunds_netted").NonNegative().Immutable(),
		field.Int64("carried_in").NonNegative().Immutable(),
		field.Int64("carried_out").NonNegative().Immutable(),
		field.Int64("net").NonNegative().Immutable(),
		// The payout's destination, fixed at its first attempt.
		field.String("payout_chain").Optional(),
		field.String("payout_address").Optional(),
		field.String("tx_hash").Optional(),
		// The provider's payout id (fiat_pix) or the tx hash.
		field.String("reference").Optional(),
		field.String("fx_rate").Optional(),
		field.String("fiat_amount").Optional(),
		field.String("fiat_currency").Optional(),
		field.String("settlement_type").Immutable(),
		// Why the payout could not go on; cleared on success.
		field.String("error").Optional(),
		field.Time("completed_at").Optional().Nillable(),
	}
}

// Edges of the SettlementBatch.
func (SettlementBatch) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("payments", Payment.Type),
		edge.To("netted_refunds", Refund.Type),
	}
}

// Indexes of the SettlementBatch.
func (SettlementBatch) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "livemode", "chain", "seq").Unique(),
		index.Fields("status"),
	}
}
