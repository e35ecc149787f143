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

// Payment is one on-chain token transfer into a session's deposit address.
// Payments are never dropped: a late one (after expiry or cancel) is recorded
// with late=true and held for refund.
type Payment struct {
	ent.Schema
}

// Annotations of the Payment.
func (Payment) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
	}
}

// Mixin of the Payment.
func (Payment) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Payment.
func (Payment) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("session_id", uuid.UUID{}).
			Immutable(),
		field.UUID("deposit_address_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		field.String("external_id").
			NotEmpty().
			Unique().
			Immutable(),
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.String("token").
			Default("USDC").
			Immutable(),
		field.String("tx_hash").
			NotEmpty().
			Immutable(),
		// Position of the transfer inside the transaction: the log index on
		// EVM, the instruction index on Solana. With tx_hash it identifies the
		// transfer, so rescanning a block never records it twice.
		field.Int("log_index").
			NonNegative().
			Immutable(),
		field.String("from_address").
			Immutable(),
		field.String("to_address").
			Immutable(),
		field.Int64("amount_token").
			NonNegative().
			Immutable().
			Annotations(baseUnits),
		usdField("amount_usd"),
		field.Int64("block_number").
			NonNegative(),
		field.String("block_hash").
			Optional(),
		field.Int("confirmations").
			NonNegative().
			Default(0),
		// detected: seen, not yet counted; confirming: some confirmations;
		// confirmed: enough; failed: dropped by a reorg.
		field.Enum("status").
			Values("detected", "confirming", "confirmed", "failed").
			Default("detected"),
		field.Bool("late").
			Default(false),
		field.Time("confirmed_at").
			Optional().
			Nillable(),
		// Settlement of this payment to the merchant (crypto_usdc or fiat_pix).
		field.Enum("settlement_status").
			Values("pending", "submitted", "completed", "failed", "skipped").
			Optional().
			Nillable(),
		field.String("settlement_tx_hash").
			Optional(),
		// Payout reference of the fiat provider, or the on-chain tx hash.
		field.String("settlement_reference").
			Optional(),
		// Settlement amounts in USDC base units; fx_rate as a decimal string
		// (fiat_pix only) to keep it exact.
		field.Int64("settlement_fee").
			NonNegative().
			Optional().
			Nillable().
			Annotations(baseUnits),
		field.Int64("settlement_net").
			NonNegative().
			Optional().
			Nillable().
			Annotations(baseUnits),
		field.String("settlement_fx_rate").
			Optional(),
		// What the payout provider paid (fiat_pix): amount as a decimal
		// string in its currency, e.g. "249.75" BRL.
		field.String("settlement_fiat_amount").
			Optional(),
		field.String("settlement_fiat_currency").
			Optional(),
		// Where the payout goes, fixed when it is first attempted so a
		// merchant editing its settlement address mid-payout can never
		// split one payout between two destinations.
		field.String("settlement_chain").
			Optional(),
		field.String("settlement_address").
			Optional(),
		// Why the last settlement step could not go on (e.g. no settlement
		// address yet, treasury short of liquidity); cleared on success.
		field.String("settlement_error").
			Optional(),
		field.Time("settled_at").
			Optional().
			Nillable(),
		field.String("sweep_tx_hash").
			Optional(),
		// The sweep leg (deposit address -> treasury), shared by the
		// settlement and the sweep of a held payment (sweeps.go):
		// sweep_submitted_at is written before every broadcast of it, by
		// whichever path sends it (the Solana "may have been broadcast"
		// rule counts from it); swept_at once it is included.
		field.Time("sweep_submitted_at").
			Optional().
			Nillable(),
		field.Time("swept_at").
			Optional().
			Nillable(),
		// What refunds that have not failed took back, in base units: the
		// bound of the next refund (amount_token - refunded_token), kept
		// on the row so that concurrent refunds are checked by one
		// conditional update.
		field.Int64("refunded_token").
			NonNegative().
			Default(0).
			Annotations(baseUnits),
		// The settlement batch that pays this payment out (settlement.go),
		// set when the batch is formed.
		field.UUID("settlement_batch_id", uuid.UUID{}).
			Optional().
			Nillable().
			Annotations(entgql.Skip()),
	}
}

// Edges of the Payment.
func (Payment) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("session", CheckoutSession.Type).
			Ref("payments").
			Field("session_id").
			Unique().
			Required().
			Immutable(),
		edge.From("deposit_address", DepositAddress.Type).
			Ref("payments").
			Field("deposit_address_id").
			Unique().
			Immutable(),
		edge.To("refunds", Refund.Type),
		edge.From("settlement_batch", SettlementBatch.Type).
			Ref("payments").
			Field("settlement_batch_id").
			Unique().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the Payment.
func (Payment) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("chain", "tx_hash", "log_index").Unique(),
		index.Fields("session_id"),
		// The confirmation tracker walks unconfirmed payments per chain.
		index.Fields("status", "chain"),
		index.Fields("settlement_status"),
		index.Fields("settlement_batch_id"),
	}
}
