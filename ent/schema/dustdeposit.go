package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// DustDeposit is a transfer to a deposit address below its chain's
// minimum worth counting (agentpay's dust.go): recorded once final, so the
// books count it on the address, but no payment: no webhook, no hold on
// its session's chain, nothing settled. It is swept to the treasury with
// the rest of the address's dust once that is worth the gas, all of it in
// one transfer (sweep_id names the rows it carries).
type DustDeposit struct {
	ent.Schema
}

// Annotations of the DustDeposit: internal, read by the books and the
// dust sweep only.
func (DustDeposit) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the DustDeposit.
func (DustDeposit) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the DustDeposit.
func (DustDeposit) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("deposit_address_id", uuid.UUID{}).
			Immutable(),
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.Bool("livemode").
			Immutable(),
		field.String("tx_hash").
			NotEmpty().
			Immutable(),
		field.Int("log_index").
			Immutable(),
		field.String("from_address").
			Optional().
			Immutable(),
		// USDC base units.
		field.Int64("amount").
			Positive().
			Immutable(),
		field.Int64("block_number").
			Immutable(),
		// The sweep carrying it, once one has taken it: every row of one
		// sweep_id moves in one transfer (reference fixed by the id).
		field.UUID("sweep_id", uuid.UUID{}).
			Optional().
			Nillable(),
		// As a payment's sweep columns: before every broadcast, once the
		// hash is known, once included.
		field.Time("sweep_submitted_at").
			Optional().
			Nillable(),
		field.String("sweep_tx_hash").
			Optional(),
		field.Time("swept_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the DustDeposit.
func (DustDeposit) Indexes() []ent.Index {
	return []ent.Index{
		// One transfer is recorded once, as dust or as a payment.
		index.Fields("chain", "tx_hash", "log_index").Unique(),
		index.Fields("deposit_address_id", "swept_at"),
		index.Fields("sweep_id"),
	}
}
