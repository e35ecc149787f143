package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
)

// directives implements the schema's runtime directives.
func directives() DirectiveRoot {
	return DirectiveRoot{EmptyIsNull: emptyIsNull}
}

// emptyIsNull (@emptyIsNull, which ent/entc.go puts on every optional
// string of an entity) answers null for a string left unset: ent keeps
// one as "" in a Go string (a resolver of such a field may answer a
// pointer to it), and REST shows it as null.
func emptyIsNull(ctx context.Context, _ any, next graphql.Resolver) (any, error) {
	v, err := next(ctx)
	if err != nil {
		return nil, err
	}
	switch s := v.(type) {
	case string:
		if s == "" {
			return nil, nil
		}
	case *string:
		if s != nil && *s == "" {
			return nil, nil
		}
	}
	return v, nil
}
