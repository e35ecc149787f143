package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// User is a human account of the app at APP_URL: signed in without a
// password, holding custodial wallets like an agent's, paired with agents.
// Its username shares one namespace with agents' (usernames.go).
type User struct {
	ent.Schema
}

// Annotations of the User.
func (User) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the User.
func (User) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the User.
func (User) Fields() []ent.Field {
	return []ent.Field{
		field.String("username").
			NotEmpty().
			MaxLen(30).
			Unique(),
		// MaxLen counts bytes: 100 characters (agentpay.DisplayNameMaxLen,
		// counted in characters) of up to 4 bytes each.
		field.String("display_name").
			MaxLen(400).
			Default(""),
		// Lower-cased (NormalizeEmail): one account per address.
		field.String("email").
			NotEmpty().
			MaxLen(254).
			Unique(),
		field.Time("email_verified_at").
			Optional().
			Nillable(),
		// Identity verification (issue 12 moves it past not_started).
		field.Enum("identity_status").
			Values("not_started", "pending", "requires_input", "verified", "rejected").
			Default("not_started"),
	}
}

// Edges of the User.
func (User) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("wallets", Wallet.Type),
		edge.To("pairings", Pairing.Type),
		edge.To("identity_verifications", IdentityVerification.Type),
		edge.To("card_requests", CardRequest.Type).
			Annotations(entgql.Skip()),
	}
}
