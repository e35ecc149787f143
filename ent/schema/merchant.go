package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"agentpay/ent/schematype"
)

// Merchant accepts checkout payments and receives webhooks.
type Merchant struct {
	ent.Schema
}

// Mixin of the Merchant.
func (Merchant) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Merchant.
func (Merchant) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").
			NotEmpty(),
		field.String("email").
			NotEmpty(),
		field.String("website").
			Optional(),
		field.String("webhook_url").
			Optional(),
		field.String("success_url").
			Optional(),
		field.String("cancel_url").
			Optional(),
		field.Enum("settlement_type").
			Values("crypto_usdc", "fiat_pix").
			Default("crypto_usdc"),
		field.String("settlement_address").
			Optional(),
		// Empty means "the chain the customer paid on".
		field.String("settlement_chain").
			Optional(),
		// Empty means the default: USDC on every chain.
		field.JSON("accepted_tokens", []schematype.TokenRef{}).
			Optional().
			Annotations(entgql.Skip()),
		field.String("brand_color").
			Optional(),
		// Encrypted (not hashed) because every delivery signs with it.
		field.Bytes("webhook_secret_encrypted").
			Sensitive().
			Annotations(entgql.Skip()),
		field.Bool("active").
			Default(true),
		field.Time("deactivated_at").
			Optional().
			Nillable(),
	}
}

// Edges of the Merchant.
func (Merchant) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("keys", MerchantKey.Type),
		edge.To("sessions", CheckoutSession.Type),
		edge.To("webhook_events", WebhookEvent.Type),
	}
}
