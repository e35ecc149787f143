package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// MerchantKey is one public/secret key pair of a merchant for one mode. Rolling
// sets revoked_at on the old pair and inserts a new one, so old keys stop
// working on every instance at once (lookups filter on revoked_at IS NULL).
type MerchantKey struct {
	ent.Schema
}

// Mixin of the MerchantKey.
func (MerchantKey) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the MerchantKey.
func (MerchantKey) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.Enum("kind").
			Values("live", "test").
			Immutable(),
		// Public keys are not secret (they sit in the checkout page), so they
		// are stored as is and looked up directly.
		field.String("public_key").
			NotEmpty().
			Unique().
			Immutable(),
		// SHA-256 of the secret key (agentpay.HashSecret).
		field.Bytes("secret_key_hash").
			NotEmpty().
			Unique().
			Immutable().
			Sensitive().
			Annotations(entgql.Skip()),
		field.Time("revoked_at").
			Optional().
			Nillable(),
	}
}

// Edges of the MerchantKey.
func (MerchantKey) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("merchant", Merchant.Type).
			Ref("keys").
			Field("merchant_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the MerchantKey.
func (MerchantKey) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id", "kind", "revoked_at"),
	}
}
