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

// CardRequest is an agent's request that its paired human approve a card
// purchase, and what followed: the reservation of the amount, the
// single-use card, its charge and the return of what was not spent.
// cards.go holds the states and who moves them.
type CardRequest struct {
	ent.Schema
}

// Annotations of the CardRequest.
func (CardRequest) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the CardRequest.
func (CardRequest) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the CardRequest.
func (CardRequest) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).
			Immutable(),
		// The human asked (one with an approved pairing and verified
		// identity when the request was made).
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		field.Int64("amount").
			Positive().
			Immutable().
			Comment("USDC base units: the card's maximum"),
		field.String("merchant_name").
			NotEmpty().
			MaxLen(200).
			Immutable(),
		field.String("description").
			MaxLen(2000).
			Default("").
			Immutable(),
		field.Enum("status").
			Values("pending_approval", "approved", "denied", "expired", "failed", "used", "expired_unused").
			Default("pending_approval"),
		// The humans whose approval it needs: the human asked (user_id) and
		// every paired human whose spending policy would hold the purchase
		// (spendingpolicies.go). Each must approve, any one may deny. Empty
		// on requests made before it was kept: user_id alone.
		field.JSON("deciders", []uuid.UUID{}).
			Optional().
			Immutable(),
		// The deciders who approved so far (the last one's approval
		// reserves the amount).
		field.JSON("approved_by", []uuid.UUID{}).
			Optional(),
		// When a pending request lapses (CARD_REQUEST_TTL after it was made).
		field.Time("expires_at"),
		// When the deciders were reminded that it is about to expire
		// (approvalreminders.go: once, mailed in the transaction that sets
		// it).
		field.Time("reminded_at").
			Optional().
			Nillable(),
		field.Time("decided_at").
			Optional().
			Nillable(),
		// Why a request failed after approval (the reservation did not
		// go through, the issuer refused).
		field.String("error").
			MaxLen(500).
			Optional(),
		// The transfer that reserved the amount: the agent's wallet to the
		// treasury.
		field.UUID("reserve_transfer_id", uuid.UUID{}).
			Optional().
			Nillable(),
		field.String("issuer").
			MaxLen(50).
			Optional(),
		// The issuer's id of the card.
		field.String("card_reference").
			MaxLen(100).
			Optional().
			Nillable(),
		// The one-time card token the agent reads the card by (ctok_...).
		field.String("card_token").
			MaxLen(100).
			Optional().
			Nillable(),
		field.String("card_last4").
			MaxLen(4).
			Optional(),
		// The card's number, expiry and CVC sealed with the vault; cleared
		// once the card is used or expires.
		field.Bytes("card_sealed").
			Optional().
			Nillable().
			Sensitive(),
		field.Time("card_expires_at").
			Optional().
			Nillable(),
		// When the agent read the card's details (they are shown once).
		field.Time("card_revealed_at").
			Optional().
			Nillable(),
		field.Int64("charged_amount").
			Optional().
			Nillable().
			Comment("USDC base units the merchant charged"),
		field.String("charged_merchant").
			MaxLen(200).
			Optional(),
		field.Time("charged_at").
			Optional().
			Nillable(),
		// What returns to the agent once the card is used or expires
		// unused: amount - charged_amount.
		field.Int64("refund_amount").
			Default(0).
			Comment("USDC base units returned from the treasury"),
		field.String("refund_chain").
			MaxLen(20).
			Optional(),
		field.String("refund_to").
			MaxLen(100).
			Optional(),
		field.String("refund_tx_hash").
			MaxLen(100).
			Optional(),
		// When the return was last broadcast (a Solana resend waits until
		// an earlier broadcast can no longer land).
		field.Time("refund_sent_at").
			Optional().
			Nillable(),
		field.Time("refunded_at").
			Optional().
			Nillable(),
		// The agent's Idempotency-Key and the request it came with.
		field.String("idempotency_key").
			MaxLen(255).
			Optional().
			Nillable().
			Immutable(),
		field.Bytes("fingerprint").
			Optional().
			Immutable(),
	}
}

// Edges of the CardRequest.
func (CardRequest) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("agent", Agent.Type).
			Ref("card_requests").
			Field("agent_id").
			Unique().
			Required().
			Immutable(),
		edge.From("user", User.Type).
			Ref("card_requests").
			Field("user_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the CardRequest.
func (CardRequest) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "created_at"),
		index.Fields("user_id", "created_at"),
		index.Fields("status", "expires_at"),
		index.Fields("card_token").Unique(),
		index.Fields("agent_id", "idempotency_key").Unique(),
	}
}
