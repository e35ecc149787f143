package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// PartnerAttestation is an identity partner's attestation (a JWT) that an
// agent presented to POST /agents/me/verify-partner and that verified. It
// is kept so that one attestation is accepted once: the unique index on
// (partner, jti) refuses a replay, also when two instances receive the
// same token at once. It also records which partner verified the agent and
// when (the agent's partner_provider holds the latest).
type PartnerAttestation struct {
	ent.Schema
}

// Mixin of the PartnerAttestation.
func (PartnerAttestation) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the PartnerAttestation.
func (PartnerAttestation) Fields() []ent.Field {
	return []ent.Field{
		// The configured partner's name (PARTNERS).
		field.String("partner").
			NotEmpty().
			MaxLen(64).
			Immutable(),
		// The token's jti: the partner's id of this attestation.
		field.String("jti").
			NotEmpty().
			MaxLen(128).
			Immutable(),
		field.UUID("agent_id", uuid.UUID{}).
			Immutable(),
		// The token's sub, iat and exp, as verified.
		field.String("subject").
			NotEmpty().
			Immutable(),
		field.Time("issued_at").
			Immutable(),
		field.Time("expires_at").
			Immutable(),
	}
}

// Edges of the PartnerAttestation.
func (PartnerAttestation) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("agent", Agent.Type).
			Ref("partner_attestations").
			Field("agent_id").
			Unique().
			Required().
			Immutable(),
	}
}

// Indexes of the PartnerAttestation.
func (PartnerAttestation) Indexes() []ent.Index {
	return []ent.Index{
		// A jti is used once per partner, across every instance.
		index.Fields("partner", "jti").Unique(),
		index.Fields("agent_id"),
	}
}

// Annotations keep attestations out of GraphQL.
func (PartnerAttestation) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}
