package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// PasskeyCeremony is a WebAuthn ceremony between its two steps
// (passkeys.go): the challenge's session data, kept here rather than in a
// process's memory so any process can finish what another began. Used
// once, within minutes.
type PasskeyCeremony struct {
	ent.Schema
}

// Annotations of the PasskeyCeremony.
func (PasskeyCeremony) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the PasskeyCeremony.
func (PasskeyCeremony) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the PasskeyCeremony.
func (PasskeyCeremony) Fields() []ent.Field {
	return []ent.Field{
		field.Enum("purpose").
			Values("register", "signin").
			Immutable(),
		// The user registering a passkey; none for a sign-in, which
		// learns the user from the passkey.
		field.UUID("user_id", uuid.UUID{}).
			Optional().
			Nillable().
			Immutable(),
		// go-webauthn's SessionData as JSON: the challenge and what the
		// response is checked against.
		field.Bytes("session_data").
			NotEmpty().
			Immutable(),
		field.Time("expires_at").
			Immutable(),
		field.Time("used_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the PasskeyCeremony.
func (PasskeyCeremony) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("expires_at"),
	}
}
