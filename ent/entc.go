//go:build ignore

// entc.go drives code generation for the ent schema. go generate runs it from
// ./ent, so every path below is relative to this directory.
package main

import (
	"fmt"
	"log"
	"strings"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"
	"github.com/vektah/gqlparser/v2/ast"
)

// The GraphQL naming convention (docs/architecture.md, "GraphQL naming"): fields and
// arguments in lowerCamelCase with acronyms spelled as words (externalId,
// successUrl, txHash), enum values in UPPER_CASE (PENDING). entgql names
// fields with ent's camel (externalID, successURL) and enum values as
// stored (pending), so the three rules below set the GraphQL spelling of
// every entity at once; the database, Go and REST keep theirs.

// graphqlName spells an ent field or edge name (snake_case) the GraphQL
// way: external_id -> externalId, success_url -> successUrl.
func graphqlName(entName string) string {
	words := strings.Split(entName, "_")
	for i, w := range words {
		w = strings.ToLower(w)
		if i > 0 && w != "" {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		words[i] = w
	}
	return strings.Join(words, "")
}

var entCamel = gen.Funcs["camel"].(func(string) string)

// graphqlNames maps every field and edge whose ent camel name differs from
// graphqlName to the latter (what entgql.MapsTo does for one field), before
// entgql reads the graph: its schema and its field collection
// (gql_collection.go) then agree on the name. An explicit MapsTo wins.
func graphqlNames(next gen.Generator) gen.Generator {
	return gen.GenerateFunc(func(g *gen.Graph) error {
		for _, n := range g.Nodes {
			for _, f := range n.Fields {
				if err := mapGraphQLName(&f.Annotations, f.Name); err != nil {
					return fmt.Errorf("%s.%s: %w", n.Name, f.Name, err)
				}
			}
			for _, e := range n.Edges {
				if err := mapGraphQLName(&e.Annotations, e.Name); err != nil {
					return fmt.Errorf("%s.%s: %w", n.Name, e.Name, err)
				}
			}
		}
		return next.Generate(g)
	})
}

func mapGraphQLName(annotations *gen.Annotations, entName string) error {
	name := graphqlName(entName)
	if name == entCamel(entName) {
		return nil
	}
	ant := &entgql.Annotation{}
	if v := (*annotations)[ant.Name()]; v != nil {
		if err := ant.Decode(v); err != nil {
			return err
		}
	}
	if len(ant.Mapping) > 0 {
		return nil
	}
	ant.Mapping, ant.Unbind = []string{name}, true
	if *annotations == nil {
		*annotations = gen.Annotations{}
	}
	(*annotations)[ant.Name()] = ant
	return nil
}

// upperEnumValues spells the values of the ent enums in upper case (pending
// -> PENDING), as template/graphql_enum.tmpl marshals them.
func upperEnumValues(g *gen.Graph, s *ast.Schema) error {
	entEnums := map[string]bool{}
	for _, n := range g.Nodes {
		for _, f := range n.Fields {
			if f.IsEnum() && !f.HasGoType() {
				entEnums[g.Package+"/"+f.Type.Ident] = true
			}
		}
	}
	for _, def := range s.Types {
		if def.Kind != ast.Enum {
			continue
		}
		model := def.Directives.ForName("goModel")
		if model == nil || model.Arguments.ForName("model") == nil ||
			!entEnums[model.Arguments.ForName("model").Value.Raw] {
			continue
		}
		for _, v := range def.EnumValues {
			v.Name = strings.ToUpper(v.Name)
		}
	}
	return nil
}

// emptyIsNull is the directive graph/nulls.go implements.
const emptyIsNull = "emptyIsNull"

// optionalStringsNull marks each optional string of an entity (ent keeps
// an unset one as "") with @emptyIsNull, so it reads null when unset, as
// REST shows it, while the Go field stays a string.
func optionalStringsNull(g *gen.Graph, s *ast.Schema) error {
	s.Directives[emptyIsNull] = &ast.DirectiveDefinition{
		Name:        emptyIsNull,
		Description: "An optional string the object leaves unset reads null (never \"\").",
		Locations:   []ast.DirectiveLocation{ast.LocationFieldDefinition},
	}
	for _, n := range g.Nodes {
		nodeAnt := &entgql.Annotation{}
		if v := n.Annotations[nodeAnt.Name()]; v != nil {
			if err := nodeAnt.Decode(v); err != nil {
				return err
			}
		}
		typeName := n.Name
		if nodeAnt.Type != "" {
			typeName = nodeAnt.Type
		}
		def := s.Types[typeName]
		if def == nil || def.Kind != ast.Object {
			continue
		}
		for _, f := range n.Fields {
			if !f.Optional || f.Nillable || f.HasGoType() || f.Type.Type != field.TypeString {
				continue
			}
			ant := &entgql.Annotation{}
			if v := f.Annotations[ant.Name()]; v != nil {
				if err := ant.Decode(v); err != nil {
					return err
				}
			}
			names := ant.Mapping
			if len(names) == 0 {
				names = []string{entCamel(f.Name)}
			}
			for _, name := range names {
				fd := def.Fields.ForName(name)
				if fd == nil || fd.Type.NonNull || fd.Type.NamedType != "String" || fd.Directives.ForName(emptyIsNull) != nil {
					continue
				}
				fd.Directives = append(fd.Directives, &ast.Directive{Name: emptyIsNull, Location: ast.LocationFieldDefinition})
			}
		}
	}
	return nil
}

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
		entgql.WithSchemaHook(upperEnumValues, optionalStringsNull),
	)
	if err != nil {
		log.Fatalf("creating entgql extension: %v", err)
	}
	err = entc.Generate("./schema", &gen.Config{
		// Before entgql's hooks: they read the names it sets.
		Hooks: []gen.Hook{graphqlNames},
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
	},
		entc.Extensions(ex),
		// After the extension: template/graphql_enum.tmpl replaces entgql's
		// enum marshalling (upper-case GraphQL values).
		entc.TemplateDir("./template"),
	)
	if err != nil {
		log.Fatalf("running ent codegen: %v", err)
	}
}
