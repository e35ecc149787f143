package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// MailMessage is one e-mail in the outbox (the rules: mail.go): written in
// the transaction of the change that caused it, together with its send_mail
// job, and marked sent by that job. Its id is a UUIDv7, so messages created
// in the same instant still sort in the order they were queued.
type MailMessage struct {
	ent.Schema
}

// Mixin of the MailMessage.
func (MailMessage) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the MailMessage.
func (MailMessage) Fields() []ent.Field {
	return []ent.Field{
		// One bare address (RFC 5322 addr-spec), as queued.
		field.String("to").
			NotEmpty().
			MaxLen(320).
			Immutable(),
		field.String("subject").
			MaxLen(998).
			Immutable(),
		// The bodies are erased once the message is sent, refused for good,
		// given up on, or its link expired (they may carry sign-in and
		// invitation links, which are bearer secrets); the dev catcher
		// keeps its own copy for /dev/mail.
		field.Text("text"),
		field.Text("html"),
		// When the link the message carries stops working; NULL: it carries
		// none that expires. Unsent by then, the message is not sent and
		// its bodies are erased (EraseExpiredMail).
		field.Time("expires_at").
			Optional().
			Nillable(),
		// SHA-256 of the message's unsubscribe link's token (mail from
		// agents: invitations, pairing requests); NULL for other mail.
		field.Bytes("unsubscribe_token_hash").
			Optional().
			Nillable().
			Sensitive(),
		// Tries started (claims taken); attempt fences a claim: a try whose
		// claim expired and was taken over cannot release the newer one.
		field.Int("attempts").
			NonNegative().
			Default(0),
		// A try holds the message until then, so two workers never send it
		// at the same time; after it, another try may take it over.
		field.Time("locked_until").
			Optional().
			Nillable(),
		// Set once the transport accepted the message: it is not sent again.
		field.Time("sent_at").
			Optional().
			Nillable(),
		// Set when the receiving side refused the message for good (5xx at
		// RCPT TO or DATA): it is not tried again.
		field.Time("failed_at").
			Optional().
			Nillable(),
		// Why the last try failed: short, and never the SMTP URL or password.
		field.String("last_error").
			MaxLen(300).
			Default(""),
		// Who took it: "smtp", or "catcher" under `agentpay dev` without
		// SMTP_URL.
		field.String("transport").
			MaxLen(20).
			Default(""),
	}
}

// Indexes of the MailMessage.
func (MailMessage) Indexes() []ent.Index {
	return []ent.Index{
		// A recipient's messages, newest first (/dev/mail; limits per
		// address).
		index.Fields("to", "created_at"),
		// The expiry sweep (EraseExpiredMail).
		index.Fields("expires_at"),
		// An unsubscribe link's lookup.
		index.Fields("unsubscribe_token_hash").Unique(),
	}
}

// Annotations keep the outbox out of GraphQL.
func (MailMessage) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}
