package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

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
		// The contact e-mail trimmed and lower-cased (agentpay's
		// NormalizeEmailOrSame), written with email: what a verified user's
		// address is compared with to find the merchants they own, by an
		// index (email keeps the merchant's own spelling for display).
		field.String("email_normalized").
			Default("").
			Annotations(entgql.Skip(entgql.SkipAll)),
		// When the current contact e-mail was confirmed: its confirmation
		// link followed (merchantemail.go), or, for a merchant registered
		// before contact e-mails were confirmed, the address's first
		// e-mailed sign-in. NULL: no account owns the merchant through the
		// address (claimMemberships). Cleared when the e-mail changes.
		field.Time("email_verified_at").
			Optional().
			Nillable().
			Annotations(entgql.Skip(entgql.SkipAll)),
		// Set by the migration on merchants registered before contact
		// e-mails were confirmed by link: the address's next e-mailed
		// sign-in confirms it. Cleared when the e-mail changes or is
		// confirmed.
		field.Bool("email_confirms_on_signin").
			Default(false).
			Annotations(entgql.Skip(entgql.SkipAll)),
		field.String("website").
			Optional(),
		// The live-mode webhook URL; test mode has its own
		// (test_webhook_url), so a test key cannot redirect live events.
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
		// Held payments (late, over-, repeat: swept but not counted) are
		// paid out in the next settlement batch like counted payments
		// when on; held until refunded when off.
		field.Bool("settle_held_payments").
			Default(false),
		// Empty means the default: USDC on every chain.
		field.JSON("accepted_tokens", []schematype.TokenRef{}).
			Optional().
			Annotations(entgql.Skip()),
		field.String("brand_color").
			Optional(),
		// The live-mode webhook secret, encrypted (not hashed) because every
		// delivery signs with it.
		field.Bytes("webhook_secret_encrypted").
			Sensitive().
			Annotations(entgql.Skip()),
		// The live secret a roll replaced, still signing next to the new one
		// until webhook_secret_previous_expires_at (the rotation overlap).
		field.Bytes("webhook_secret_previous_encrypted").
			Optional().
			Sensitive().
			Annotations(entgql.Skip()),
		field.Time("webhook_secret_previous_expires_at").
			Optional().
			Nillable().
			Annotations(entgql.Skip()),
		// Test mode's webhook URL and secrets, apart from live mode's, so
		// that a test key (which reaches test-mode state only) can neither
		// redirect live events nor have anything signed with the live
		// secret. The secret is NULL for merchants registered before modes
		// had their own: they get one by rolling it with a test key.
		field.String("test_webhook_url").
			Optional().
			Annotations(entgql.Skip()),
		field.Bytes("test_webhook_secret_encrypted").
			Optional().
			Sensitive().
			Annotations(entgql.Skip()),
		field.Bytes("test_webhook_secret_previous_encrypted").
			Optional().
			Sensitive().
			Annotations(entgql.Skip()),
		field.Time("test_webhook_secret_previous_expires_at").
			Optional().
			Nillable().
			Annotations(entgql.Skip()),
		// ACP order webhooks (acp_webhooks.go): where a mode's ACP
		// order_create/order_update events go (the agent platform's
		// endpoint) and the secret their Merchant-Signature is made with,
		// sealed by the vault (encrypted, not hashed: every delivery signs
		// with it). Per mode, like the merchant's own webhooks, so a test
		// key can neither redirect live orders nor learn the live secret.
		field.String("acp_webhook_url").
			Optional().
			Annotations(entgql.Skip()),
		field.Bytes("acp_webhook_secret_encrypted").
			Optional().
			Sensitive().
			Annotations(entgql.Skip()),
		field.String("test_acp_webhook_url").
			Optional().
			Annotations(entgql.Skip()),
		field.Bytes("test_acp_webhook_secret_encrypted").
			Optional().
			Sensitive().
			Annotations(entgql.Skip()),
		field.Bool("active").
			Default(true),
		field.Time("deactivated_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the Merchant.
func (Merchant) Indexes() []ent.Index {
	return []ent.Index{
		// The owner lookup of a signing-in user (claimMemberships).
		index.Fields("email_normalized"),
	}
}

// Edges of the Merchant.
func (Merchant) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("keys", MerchantKey.Type),
		// GraphQL shows these two as bounded pages (graph/merchants.graphql),
		// not as the generated every-row lists.
		edge.To("sessions", CheckoutSession.Type).
			Annotations(entgql.Skip()),
		edge.To("webhook_events", WebhookEvent.Type).
			Annotations(entgql.Skip()),
	}
}
