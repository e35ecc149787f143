package graph

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"agentpay"
)

// TestGraphQLActions: every action a message of the rules may name has a
// GraphQL rendering, and each operation it names is one the served schema
// has (a mutation on Mutation, a query on Query); an action without one is
// REST's route, said to be REST's. A rendering stays JSON-safe, as stored
// messages (account events) are rendered inside their JSON.
func TestGraphQLActions(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	require.Len(t, graphQLActions, len(agentpay.Actions))
	for _, a := range agentpay.Actions {
		op, ok := graphQLActions[a]
		require.True(t, ok, "action %s has no GraphQL entry", a)
		term := graphQLTerm(a, "0193")
		require.NotContains(t, term, `"`)
		require.NotContains(t, term, `{{`, "%s is rendered", a)
		if op == "" {
			require.True(t, strings.HasPrefix(term, "REST GET /") || strings.HasPrefix(term, "REST POST /"), term)
			continue
		}
		kind, field, ok := strings.Cut(op, " ")
		require.True(t, ok, op)
		root := map[string]string{"mutation": "Mutation", "query": "Query"}[kind]
		require.NotEmpty(t, root, "%s: mutation or query, not %q", a, kind)
		require.NotNil(t, schema.Types[root].Fields.ForName(field), "%s: the schema has no %s", a, op)
	}
}

// TestGraphQLRendersActions: a message naming an action reaches a GraphQL
// client in GraphQL's words, in an error and inside a stored event's data.
func TestGraphQLRendersActions(t *testing.T) {
	msg := "no approved pairing (" + agentpay.ActionRequestPairing.Mark() + "); read it with " + agentpay.ActionReadCardRequest.Mark("0193abcd") + "."
	require.Equal(t, "no approved pairing (mutation requestPairing); read it with REST GET /agents/me/pairings/card/requests/0193abcd.", renderGraphQL(msg))
	ev, err := accountEventModel(agentpay.AccountEvent{ID: 1, Kind: "card.issued", Data: []byte(`{"message":"` + msg + `"}`)})
	require.NoError(t, err)
	require.Equal(t, renderGraphQL(msg), ev.Data["message"])
}
