package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"github.com/google/uuid"
)

// Relay is a payer-signed authorization the treasury relays, paying its
// gas (agentpay's relays.go): recorded under the payer's lock before it is
// broadcast, so the payer's relays in flight count against its balance, and
// kept with its outcome, so a payer whose relays revert can be refused.
type Relay struct {
	ent.Schema
}

// Annotations of the Relay: the service's own bookkeeping, not a GraphQL
// node.
func (Relay) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// Mixin of the Relay.
func (Relay) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the Relay.
func (Relay) Fields() []ent.Field {
	return []ent.Field{
		field.Bool("livemode").
			Immutable(),
		field.String("chain").
			NotEmpty().
			Immutable(),
		// The payer's address as the chain's wallets normalise it.
		field.String("payer").
			NotEmpty().
			Immutable(),
		// The authorization's nonce, 0x-hex: with chain and payer, which
		// authorization this is.
		field.String("nonce").
			NotEmpty().
			Immutable(),
		// What the authorization moves, in the token's base units.
		field.Int64("value").
			Positive().
			Immutable(),
		field.UUID("merchant_id", uuid.UUID{}).
			Immutable(),
		field.UUID("session_id", uuid.UUID{}).
			Immutable(),
		// pending: recorded, not yet broadcast; submitted: broadcast;
		// succeeded: included and moved the value; reverted: included and
		// reverted (the treasury paid its gas); dropped: refused before
		// any broadcast (no gas spent), or superseded by a later relay of
		// the same authorization (which carries its outcome).
		field.Enum("status").
			Values("pending", "submitted", "succeeded", "reverted", "dropped").
			Default("pending"),
		field.String("tx_hash").
			Optional(),
		// Until when the relay counts as in flight while pending or
		// submitted: the authorization's validBefore, at most
		// RelayInFlightFor after it was recorded.
		field.Time("in_flight_until"),
		// When it succeeded, reverted or was dropped.
		field.Time("finished_at").
			Optional().
			Nillable(),
	}
}

// Indexes of the Relay.
func (Relay) Indexes() []ent.Index {
	return []ent.Index{
		// A payer's relays on a chain: counted, and summed in flight.
		index.Fields("livemode", "chain", "payer", "status"),
		// A payer's reverts, newest first.
		index.Fields("livemode", "payer", "status", "finished_at"),
		index.Fields("livemode", "chain", "payer", "nonce"),
	}
}
