package ent_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// TestGeneratedGraphQLSchemaIsValid guards the generated ../graph/ent.graphql:
// gqlgen reads it together with the hand-written files, and a broken schema
// only shows up there much later.
func TestGeneratedGraphQLSchemaIsValid(t *testing.T) {
	t.Parallel()

	data, err := os.ReadFile("../graph/ent.graphql")
	require.NoError(t, err)

	_, gqlErr := gqlparser.LoadSchema(&ast.Source{Name: "ent.graphql", Input: string(data)})
	require.Nil(t, gqlErr, "graph/ent.graphql is not a valid GraphQL schema: %v", gqlErr)
}
