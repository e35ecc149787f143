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

// CheckoutSession is a merchant's request to be paid an amount in USD.
type CheckoutSession struct {
	ent.Schema
}

// Annotations of the CheckoutSession.
func (CheckoutSession) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
	}
}

// Mixin of the CheckoutSession.
func (CheckoutSession) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the CheckoutSession.
func (CheckoutSession) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		// The public, URL-safe identifier used in /pay/<external_id>.
		field.String("external_id").
			NotEmpty().
			Unique().
			Immutable(),
		field.Bool("livemode").
			Immutable(),
		usdField("amount_usd"),
		field.String("currency").
			Default("USD").
			Immutable(),
		field.String("description").
			Optional(),
		field.String("success_url").
			Optional(),
		field.String("cancel_url").
			Optional(),
		field.JSON("metadata", map[string]any{}).
			Optional(),
		// NULL when absent: NULLs never collide in the unique index below, on
		// either engine.
		field.String("idempotency_key").
			Optional().
			Nillable().
			Immutable(),
		field.Enum("status").
			Values("pending", "detecting", "confirming", "confirmed", "expired", "cancelled").
			Default("pending"),
		// Set when the customer selects a payment method.
		field.String("chain").
			Optional(),
		field.String("token").
			Optional(),
		field.Time("expires_at"),
		field.Time("confirmed_at").
			Optional().
			Nillable(),
		field.Time("cancelled_at").
			Optional().
			Nillable(),
		field.Time("expired_at").
			Optional().
			Nillable(),
	}
}

// Edges of the CheckoutSession.
func (CheckoutSession) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("merchant", Merchant.Type).
			Ref("sessions").
			Field("merchant_id").
			Unique().
			Required().
			Immutable(),
		edge.To("deposit_addresses", DepositAddress.Type),
		edge.To("payments", Payment.Type).
			Annotations(entgql.RelayConnection()),
		edge.To("webhook_events", WebhookEvent.Type),
	}
}

// Indexes of the CheckoutSession.
func (CheckoutSession) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "livemode", "idempotency_key").Unique(),
		// Merchant's session list, newest first.
		index.Fields("merchant_id", "livemode", "created_at"),
		// The expiry job scans open sessions by deadline.
		index.Fields("status", "expires_at"),
		// A merchant's open sessions in a mode are counted at each create
		// (the open-session cap).
		index.Fields("merchant_id", "livemode", "status", "expires_at"),
	}
}
