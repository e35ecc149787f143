package graph

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"agentpay"
)

var (
	// lowerCamelCase, acronyms as words: no two upper-case letters in a row.
	graphqlFieldName = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	upperRun         = regexp.MustCompile(`[A-Z]{2}`)
	graphqlEnumValue = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// closedSetField names the fields whose values are a closed set, so an
// enum (UPPER_CASE values), never a String of lower-case words: status,
// xStatus, operation and mode.
func closedSetField(name string) bool {
	return name == "status" || name == "operation" || name == "mode" || strings.HasSuffix(name, "Status")
}

// TestSchemaNamingConvention: every field, argument and input field of the
// served schema (ent.graphql and the hand-written files) is lowerCamelCase
// with acronyms as words, every enum value UPPER_CASE, and no status or
// operation a String (docs/architecture.md, "GraphQL naming").
func TestSchemaNamingConvention(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	var bad []string
	checkName := func(where, name string) {
		if strings.HasPrefix(name, "__") { // introspection's own
			return
		}
		if !graphqlFieldName.MatchString(name) || upperRun.MatchString(name) {
			bad = append(bad, where+"."+name)
		}
	}
	checkArgs := func(where string, args ast.ArgumentDefinitionList) {
		for _, a := range args {
			checkName(where+"("+a.Name+":)", a.Name)
		}
	}
	for name, def := range schema.Types {
		if def.BuiltIn || strings.HasPrefix(name, "__") {
			continue
		}
		for _, f := range def.Fields {
			checkName(name, f.Name)
			checkArgs(name+"."+f.Name, f.Arguments)
			if closedSetField(f.Name) && f.Type.Name() == "String" {
				bad = append(bad, name+"."+f.Name+": String (a closed set is an enum)")
			}
		}
		for _, v := range def.EnumValues {
			if !graphqlEnumValue.MatchString(v.Name) {
				bad = append(bad, name+"."+v.Name)
			}
		}
	}
	for name, d := range schema.Directives {
		if !d.Position.Src.BuiltIn {
			checkArgs("@"+name, d.Arguments)
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad, "names breaking the GraphQL naming convention")
	// The walk saw the generated entities and their enums.
	require.NotNil(t, schema.Types["CheckoutSession"].Fields.ForName("externalId"))
	require.NotNil(t, schema.Types["CheckoutSessionStatus"].EnumValues.ForName("PENDING"))
	// And the hand-written types' statuses.
	require.Equal(t, "PairingStatus", schema.Types["ViewerPairing"].Fields.ForName("status").Type.Name())
	require.True(t, closedSetField("status") && closedSetField("sessionStatus") && closedSetField("operation") && closedSetField("mode"))
	require.False(t, closedSetField("statusCode"), "a number, not a closed set")
}

// TestEntEnumsUpperCaseInGraphQLOnly: an ent enum reads and is taken in
// upper case over GraphQL, while the service and REST keep the stored
// lower-case value; an unset optional string of an entity reads null, as
// on REST, not "".
func TestEntEnumsUpperCaseInGraphQLOnly(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Naming Shop", agentpay.MerchantInput{})
	key := m.Keys.TestSecretKey

	out := api.do(t, key, `mutation($in: CreateSessionInput!) { createSession(input: $in) {
		externalId status successUrl cancelUrl description chain token } }`,
		map[string]any{"in": map[string]any{"amount": json.Number("3.10"), "currency": "USD"}})
	var created struct {
		CreateSession map[string]any
	}
	out.decode(t, &created)
	s := created.CreateSession
	require.Equal(t, "PENDING", s["status"])
	for _, unset := range []string{"successUrl", "cancelUrl", "description", "chain", "token"} {
		v, present := s[unset]
		require.True(t, present, unset)
		require.Nil(t, v, "%s: an unset optional string reads null", unset)
	}
	id := s["externalId"].(string)
	stored, err := api.Svc.SessionByExternalID(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, "pending", string(stored.Status), "stored in lower case")

	// A set one reads as set; an enum argument is upper case, the lower-case
	// stored form is no GraphQL value.
	out = api.do(t, key, `mutation($in: CreateSessionInput!) { createSession(input: $in) { successUrl } }`,
		map[string]any{"in": map[string]any{"amount": json.Number("1"), "currency": "USD", "successUrl": "https://shop.example/thanks"}})
	out.decode(t, &created)
	require.Equal(t, "https://shop.example/thanks", created.CreateSession["successUrl"])
	var page struct {
		Sessions struct{ TotalCount int }
	}
	api.do(t, key, `{ sessions(where: {status: [PENDING]}) { totalCount } }`, nil).decode(t, &page)
	require.Equal(t, 2, page.Sessions.TotalCount)
	require.Equal(t, "BAD_USER_INPUT", api.do(t, key, `query($s: [CheckoutSessionStatus!]) { sessions(where: {status: $s}) { totalCount } }`,
		map[string]any{"s": []string{"pending"}}).code(t))
}
