package schema

import (
	"encoding/json"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// ChainCursor is the chain watcher's durable position on one chain in one
// mode (live networks or test networks), so any worker process can resume
// scanning where the last one stopped.
type ChainCursor struct {
	ent.Schema
}

// Mixin of the ChainCursor.
func (ChainCursor) Mixin() []ent.Mixin {
	return []ent.Mixin{BaseMixin{}}
}

// Fields of the ChainCursor.
func (ChainCursor) Fields() []ent.Field {
	return []ent.Field{
		field.String("chain").
			NotEmpty().
			Immutable(),
		field.Enum("mode").
			Values("live", "test").
			Immutable(),
		// The first block (slot on Solana) not scanned yet.
		field.Int64("next_block").
			NonNegative().
			Default(0),
		// Watcher-defined state (recent block hashes for reorg detection,
		// Solana signature cursors...); opaque to the schema.
		field.JSON("pending", json.RawMessage{}).
			Optional().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the ChainCursor.
func (ChainCursor) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("chain", "mode").Unique(),
	}
}
