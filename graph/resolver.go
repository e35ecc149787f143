// Package graph is the GraphQL API: gqlgen schema files beside the one entgql
// generates, and resolvers that call the service layer only.
package graph

//go:generate go run github.com/99designs/gqlgen generate --config ../gqlgen.yml

// Resolver is the root resolver; it holds no state of its own.
type Resolver struct {
	cfg HandlerConfig
}
