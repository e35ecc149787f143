package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// SpendApproval is an agent's operation held for its paired human's
// approval by a spending policy, and what became of it: spendapprovals.go
// holds the states and who moves them.
type SpendApproval struct {
	ent.Schema
}

// Annotations of the SpendApproval.
func (SpendApproval) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}

// Mixin of the SpendApproval.
func (SpendApproval) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the SpendApproval.
func (SpendApproval) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("agent_id", uuid.UUID{}).
			Immutable(),
		field.Enum("operation").
			Values("send", "send_to_user", "pay_checkout").
			Immutable(),
		// The request as the agent made it (JSON of the operation's
		// fields), run as it is on approval.
		field.Text("request").
			Immutable(),
		field.Int64("amount").
			Positive().
			Immutable().
			Comment("USDC base units"),
		// Whom it pays: a username, or a checkout session's external id.
		field.String("recipient").
			MaxLen(100).
			Immutable(),
		// Which rule held it (shown to the human and the agent).
		field.String("reason").
			MaxLen(500).
			Immutable(),
		field.Enum("status").
			Values("awaiting_approval", "approved", "denied", "expired", "failed").
			Default("awaiting_approval"),
		field.Time("expires_at"),
		// When the deciders were reminded that it is about to expire
		// (approvalreminders.go: once, mailed in the transaction that sets
		// it).
		field.Time("reminded_at").
			Optional().
			Nillable(),
		// The humans whose decision it waits for: each one whose spending
		// policy held it (spendingpolicies.go). Every one of them must
		// approve, any one of them may deny; no other account decides.
		field.JSON("deciders", []uuid.UUID{}).
			Optional().
			Immutable(),
		// The deciders who approved so far (the last one's approval runs
		// the operation).
		field.JSON("approved_by", []uuid.UUID{}).
			Optional(),
		field.Time("decided_at").
			Optional().
			Nillable(),
		field.UUID("decided_by", uuid.UUID{}).
			Optional().
			Nillable(),
		// The transfer the approved operation recorded.
		field.UUID("transfer_id", uuid.UUID{}).
			Optional().
			Nillable(),
		// Why an approved operation did not run (a limit, the balance).
		field.String("error").
			MaxLen(500).
			Optional(),
		// The agent's Idempotency-Key and the request it came with.
		field.String("idempotency_key").
			MaxLen(255).
			Optional().
			Nillable().
			Immutable(),
		field.Bytes("fingerprint").
			Optional().
			Immutable(),
	}
}

// Indexes of the SpendApproval.
func (SpendApproval) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("agent_id", "created_at"),
		index.Fields("status", "expires_at"),
		index.Fields("agent_id", "operation", "idempotency_key").Unique(),
	}
}
