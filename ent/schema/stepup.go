package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// StepUp is a fresh proof a signed-in human gives right before one
// sensitive action (stepups.go): a passkey assertion, or, when the account
// has no passkey, a link e-mailed to its address. It is bound to the user,
// the action and the action's subject (the approval, the card request, the
// passkey, the withdrawal's exact fields), and used once, within minutes.
type StepUp struct {
	ent.Schema
}

// Annotations of the StepUp.
func (StepUp) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the StepUp.
func (StepUp) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the StepUp.
func (StepUp) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		field.Enum("action").
			Values("approve_spend", "approve_card", "withdraw", "add_passkey", "remove_passkey").
			Immutable(),
		// What the action is about: the approval's, card request's or
		// passkey's id, or the SHA-256 of the withdrawal's fields; empty
		// for adding a passkey.
		field.String("subject").
			MaxLen(100).
			Default("").
			Immutable(),
		field.Enum("method").
			Values("passkey", "email").
			Immutable(),
		// passkey: go-webauthn's SessionData (the challenge) as JSON.
		field.Bytes("session_data").
			Optional().
			Immutable(),
		// email: SHA-256 of the link's token.
		field.Bytes("token_hash").
			Optional().
			Nillable().
			Unique().
			Immutable().
			Sensitive(),
		// What it confirms, in words (the e-mail and the link's page say it).
		field.String("summary").
			MaxLen(500).
			Default("").
			Immutable(),
		field.Time("expires_at").
			Immutable(),
		// email: when the link was followed.
		field.Time("confirmed_at").
			Optional().
			Nillable(),
		// When the action spent it.
		field.Time("used_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the StepUp.
func (StepUp) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("user_id", "created_at"),
		index.Fields("expires_at"),
	}
}
