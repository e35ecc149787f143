package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// MerchantEmailConfirmation is a link e-mailed to a merchant's contact
// address when it is registered or changed (merchantemail.go): following
// it confirms the address, which then makes its account the merchant's
// owner. Single use, expiring, stored hashed.
type MerchantEmailConfirmation struct {
	ent.Schema
}

// Annotations keep the confirmations out of GraphQL.
func (MerchantEmailConfirmation) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the MerchantEmailConfirmation.
func (MerchantEmailConfirmation) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the MerchantEmailConfirmation.
func (MerchantEmailConfirmation) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		// The address it was sent to, as merchants.email_normalized: it
		// confirms the merchant only while that is still its contact
		// e-mail.
		field.String("email").
			NotEmpty().
			MaxLen(254).
			Immutable(),
		// SHA-256 of the link's token (vault.MerchantEmailToken).
		field.Bytes("token_hash").
			Unique().
			Immutable().
			Sensitive(),
		field.Time("expires_at").
			Immutable(),
		field.Time("used_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the MerchantEmailConfirmation.
func (MerchantEmailConfirmation) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("merchant_id"),
	}
}
