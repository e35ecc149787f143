package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Passkey is a WebAuthn credential a human user registered (passkeys.go):
// what verifies its assertions (the public key) and what guards against a
// cloned authenticator (the signature counter).
type Passkey struct {
	ent.Schema
}

// Annotations of the Passkey.
func (Passkey) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the Passkey.
func (Passkey) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Passkey.
func (Passkey) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("user_id", uuid.UUID{}).
			Immutable(),
		// The authenticator's credential id: what an assertion names, so
		// the sign-in lookup key (at most 1023 bytes by the spec).
		field.Bytes("credential_id").
			NotEmpty().
			MaxLen(1023).
			Unique().
			Immutable(),
		// COSE-encoded public key.
		field.Bytes("public_key").
			NotEmpty().
			Immutable(),
		// The attestation statement's format ("none" for most passkeys),
		// which the assertion check reads (FIDO U2F's appid).
		field.String("attestation_format").
			MaxLen(32).
			Default("").
			Immutable(),
		// The authenticator model (16 bytes; zero for most passkeys).
		field.Bytes("aaguid").
			MaxLen(16).
			Optional().
			Immutable(),
		// How the browser can reach the authenticator (internal, hybrid,
		// usb...), as it reported them.
		field.Strings("transports").
			Optional(),
		// The authenticator data flags (user present/verified, backup
		// eligible/state): a later assertion must agree on backup
		// eligibility.
		field.Uint8("flags"),
		// The last signature counter seen; an assertion must raise it
		// unless both are zero (authenticators without a counter).
		field.Int64("sign_count").
			NonNegative(),
		// The person's name for it ("Phone", "Laptop"): MaxLen counts
		// bytes, 64 characters (agentpay.PasskeyNameMaxLen) of up to 4.
		field.String("name").
			NotEmpty().
			MaxLen(256),
		field.Time("last_used_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the Passkey.
func (Passkey) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("user_id", "created_at"),
	}
}
