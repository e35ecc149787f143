package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Agent is a software agent holding custodial wallets and an API key.
type Agent struct {
	ent.Schema
}

// Mixin of the Agent.
func (Agent) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Agent.
func (Agent) Fields() []ent.Field {
	return []ent.Field{
		// Format rules (3-30 chars, [a-z0-9_], no leading/trailing _) are
		// enforced by the service, which owns the error messages.
		field.String("username").
			NotEmpty().
			MaxLen(30).
			Unique(),
		// SHA-256 of the API key (agentpay.HashSecret); the key itself is
		// never stored.
		field.Bytes("api_key_hash").
			NotEmpty().
			Unique().
			Sensitive().
			Annotations(entgql.Skip()),
		field.String("invite_code").
			NotEmpty().
			Unique(),
		field.Int("trust_score").
			Range(0, 100).
			Default(0),
		field.Enum("tier").
			Values("T0", "T1", "T2", "T3", "T4").
			Default("T0"),
		// The primary wallet is an edge (agents.primary_wallet_id) rather than a
		// flag on wallets so "exactly one primary" holds by construction.
		field.UUID("primary_wallet_id", uuid.UUID{}).
			Optional().
			Nillable(),
		// Trust inputs.
		field.Bool("partner_verified").
			Default(false),
		// The partner whose attestation last verified the agent (its name
		// in PARTNERS) and the token's sub; every accepted attestation is a
		// PartnerAttestation.
		field.String("partner_provider").
			Optional(),
		field.String("partner_subject").
			Optional(),
		field.Bool("human_verified").
			Default(false).
			Comment("paired with a human who completed identity verification"),
		field.Bool("external_wallet_verified").
			Default(false),
		// Counters maintained by the service in the same transaction as the
		// transfer that changes them; leaderboard and stats read them directly.
		field.Int64("tx_count").
			NonNegative().
			Default(0),
		field.Int64("volume_sent").
			NonNegative().
			Default(0).
			Comment("USDC base units sent (gross)").
			Annotations(baseUnits),
		field.Int64("volume_received").
			NonNegative().
			Default(0).
			Comment("USDC base units received (net)").
			Annotations(baseUnits),
		field.Int64("fees_paid").
			NonNegative().
			Default(0).
			Comment("USDC base units of treasury fees paid").
			Annotations(baseUnits),
		field.Time("api_key_rotated_at").
			Optional().
			Nillable(),
	}
}

// Edges of the Agent.
func (Agent) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("wallets", Wallet.Type),
		edge.To("pairings", Pairing.Type).
			Annotations(entgql.Skip()),
		edge.To("invitations", Invitation.Type).
			Annotations(entgql.Skip()),
		edge.To("partner_attestations", PartnerAttestation.Type).
			Annotations(entgql.Skip()),
		edge.To("card_requests", CardRequest.Type).
			Annotations(entgql.Skip()),
		edge.To("primary_wallet", Wallet.Type).
			Field("primary_wallet_id").
			Unique(),
		// GraphQL pages through an agent's transfers with me.transfers
		// (sent and received together); unbounded lists are not offered.
		// An agent with sends is never deleted from under them (the
		// transfer's sender is optional only because users send too).
		edge.To("sent_transfers", Transfer.Type).
			Annotations(entgql.Skip(), entsql.OnDelete(entsql.NoAction)),
		edge.To("received_transfers", Transfer.Type).
			Annotations(entgql.Skip()),
	}
}

// Indexes of the Agent.
func (Agent) Indexes() []ent.Index {
	return []ent.Index{
		// Leaderboard sorts.
		index.Fields("volume_sent"),
		index.Fields("tx_count"),
		index.Fields("trust_score"),
	}
}
