// Package schematype holds the Go types stored in JSON columns. It is kept
// apart from ent/schema so generated code and the service can import it
// without pulling in the schema definitions.
package schematype

// TokenRef names one token on one chain, e.g. {Chain: "base", Token: "USDC"}.
// A merchant's accepted_tokens is a list of these; an empty list means the
// default (USDC on every chain).
type TokenRef struct {
	Chain string `json:"chain"`
	Token string `json:"token"`
}
