//go:build ignore

// entc.go drives code generation for the ent schema. go generate runs it from
// ./ent, so every path below is relative to this directory.
package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/vektah/gqlparser/v2/ast"
)

// declareScalars adds the scalar declarations (name to description) that
// the schema refers to but entgql did not declare.
func declareScalars(scalars map[string]string) entgql.SchemaHook {
	return func(_ *gen.Graph, s *ast.Schema) error {
		for name, description := range scalars {
			if _, ok := s.Types[name]; ok {
				continue
			}
			s.Types[name] = &ast.Definition{Kind: ast.Scalar, Name: name, Description: description}
		}
		return nil
	}
}

func main() {
	ex, err := entgql.NewExtension(
		// The GraphQL schema of the entities is generated next to the
		// hand-written schema files gqlgen reads (see ../gqlgen.yml).
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("../graph/ent.graphql"),
		entgql.WithConfigPath("../gqlgen.yml"),
		// Decimal: USD amounts are decimal.Decimal (entgql.Type("Decimal") in
		// schema/money.go). Time and Map: entgql omits them when it believes
		// another schema file declares them, and it mistakes the previous
		// ent.graphql (seen through gqlgen.yml as graph/ent.graphql, not
		// ../graph/ent.graphql) for another file, so without this every
		// second run drops them. Declaring them here keeps ent.graphql valid
		// on its own and the output stable.
		entgql.WithSchemaHook(declareScalars(map[string]string{
			"Decimal": "An exact decimal number (USD amounts); never a float.",
			"BaseUnits": "An amount of USDC in base units (1 = 0.000001 USDC): a 64-bit integer, " +
				"beyond GraphQL's 32-bit Int above 2,147 USDC.",
			// Same descriptions as entgql's, so the output does not change
			// with who declared them.
			"Map":  "The builtin Map type",
			"Time": "The builtin Time type",
		})),
	)
	if err != nil {
		log.Fatalf("creating entgql extension: %v", err)
	}
	err = entc.Generate("./schema", &gen.Config{
		Features: []gen.Feature{
			// Schema changes ship as versioned SQL files (migrations/), never
			// as auto-migration at start-up.
			gen.FeatureVersionedMigration,
			gen.FeatureLock,
			// ExecContext/QueryContext on the client and Tx let the service run
			// the few statements ent cannot express (row locks, aggregates).
			gen.FeatureExecQuery,
			gen.FeatureIntercept,
		},
	}, entc.Extensions(ex))
	if err != nil {
		log.Fatalf("running ent codegen: %v", err)
	}
}
