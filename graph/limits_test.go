package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"agentpay"
	"agentpay/internal/clock"
	"agentpay/internal/httpx"
)

func secret(key string) http.Header { return http.Header{httpx.MerchantKeyHeader: {key}} }

// TestGraphQLMillionDigitAmountRefusedByItsLength: the Decimal scalar and
// the metadata numbers refuse a million-digit number by its length (the
// message names the bound), whether it comes as a JSON number or a string.
func TestGraphQLMillionDigitAmountRefusedByItsLength(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Digits", agentpay.MerchantInput{})
	million := strings.Repeat("7", 1_000_000)
	for name, in := range map[string]map[string]any{
		"number":          {"amount": json.Number(million), "currency": "USD"},
		"string":          {"amount": million, "currency": "USD"},
		"metadata number": {"amount": 12.5, "currency": "USD", "metadata": map[string]any{"n": json.Number(million)}},
	} {
		t.Run(name, func(t *testing.T) {
			status, out := post(t, api.URL, secret(m.Keys.TestSecretKey),
				bytes.NewReader(operation(t, `mutation($in: CreateSessionInput!) { createSession(input: $in) { id } }`, map[string]any{"in": in})))
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, "BAD_USER_INPUT", out.code(t))
			require.Contains(t, out.Errors[0].Message, "must be a number of at most 64 characters")
		})
	}
}

// TestGraphQLRequestBounds: the body is capped at 1 MiB (declared or
// chunked), the query text at 64 KiB, its tokens at maxQueryTokens.
func TestGraphQLRequestBounds(t *testing.T) {
	api := newMerchantAPI(t)
	pad := func(b []byte, n int) []byte { return append(b, bytes.Repeat([]byte(" "), n-len(b))...) }
	small := operation(t, `{ __typename }`, nil)

	status, out := post(t, api.URL, nil, bytes.NewReader(pad(small, httpx.MaxBodyBytes+1)))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "PAYLOAD_TOO_LARGE", out.code(t))
	status, out = post(t, api.URL, nil, io.MultiReader(bytes.NewReader(pad(small, httpx.MaxBodyBytes+1))))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "sent chunked")
	require.Equal(t, "PAYLOAD_TOO_LARGE", out.code(t))
	status, out = post(t, api.URL, nil, bytes.NewReader(pad(small, httpx.MaxBodyBytes)))
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, out.Errors, "a body of exactly 1 MiB is read")

	long := "{ __typename }" + strings.Repeat(" ", maxQueryBytes)
	status, out = post(t, api.URL, nil, bytes.NewReader(operation(t, long, nil)))
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, codeQueryTooLarge, out.code(t))

	many := "{ " + strings.Repeat("__typename ", maxQueryTokens) + "}"
	require.Less(t, len(many), maxQueryBytes)
	status, out = post(t, api.URL, nil, bytes.NewReader(operation(t, many, nil)))
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, "GRAPHQL_PARSE_FAILED", out.code(t))
}

// TestGraphQLShapeAndComplexityLimits: depth, fields (aliases and expanded
// fragments counted) and complexity (lists times their page) each refuse
// what is over and let through the largest useful queries.
func TestGraphQLShapeAndComplexityLimits(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Shapes", agentpay.MerchantInput{})
	key := secret(m.Keys.TestSecretKey)

	chain := func(levels int, leaf string) string {
		q := leaf
		for range levels {
			q = `merchant { sessions(first: 1) { ` + q + ` } }`
		}
		return `{ sessions(first: 1) { edges { node { ` + q + ` } } } }`
	}
	aliases := func(n int) string {
		var b strings.Builder
		b.WriteString("{ ")
		for i := range n {
			fmt.Fprintf(&b, "a%d: __typename ", i)
		}
		return b.String() + "}"
	}
	bomb := "query { ...F20 }\nfragment F0 on Query { __typename }\n"
	for i := 1; i <= 20; i++ {
		bomb += fmt.Sprintf("fragment F%d on Query { ...F%d ...F%d }\n", i, i-1, i-1)
	}
	const sessionScalars = `id createdAt updatedAt merchantId externalId livemode amountUsd currency description
		successUrl cancelUrl metadata idempotencyKey status chain token expiresAt confirmedAt cancelledAt expiredAt
		checkoutUrl embedUrl`

	tests := []struct {
		name, query, code string
	}{
		{"12 deep", chain(4, "externalId"), ""},
		{"13 deep", chain(4, "merchant { name }"), codeDepthLimit},
		{"1000 aliases", aliases(maxFields), ""},
		{"1001 aliases", aliases(maxFields + 1), codeFieldLimit},
		{"a fragment spread 2^20 times", bomb, codeFieldLimit},
		{"a full page of sessions", `{ sessions(first: 100) { totalCount pageInfo { hasNextPage endCursor }
			edges { cursor node { ` + sessionScalars + ` depositAddresses { chain address } } } } }`, ""},
		{"a page of events with their deliveries and attempts", `{ webhookEvents(first: 20) { edges { node {
			id eventType payload sessionExternalId deliveries { id url status attemptLog { at statusCode error } } } } } }`, ""},
		{"a page inside a page", `{ sessions(first: 100) { edges { node { payments(first: 100) { edges { node { id } } } } } } }`, codeComplexityLimit},
		{"a cycle through the merchant", `{ sessions(first: 100) { edges { node { merchant { sessions(first: 100) { id } } } } } }`, codeComplexityLimit},
		{"an unpaged connection is a full page", `{ sessions(first: 100) { edges { node { payments { edges { node { id } } } } } } }`, codeComplexityLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := post(t, api.URL, key, bytes.NewReader(operation(t, tt.query, nil)))
			if tt.code == "" {
				require.Equal(t, http.StatusOK, status)
				require.Empty(t, out.Errors)
				return
			}
			require.Equal(t, http.StatusUnprocessableEntity, status)
			require.Equal(t, tt.code, out.code(t))
		})
	}
}

// TestGraphQLNodesCap: nodes takes at most a page of ids.
func TestGraphQLNodesCap(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Nodes", agentpay.MerchantInput{})
	ids := make([]string, agentpay.MaxPageSize+1)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	q := `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`
	out := api.do(t, m.Keys.TestSecretKey, q, map[string]any{"ids": ids})
	require.Equal(t, "BAD_USER_INPUT", out.code(t))
	require.Contains(t, out.Errors[0].Message, "at most 100 ids")
	page := make([]string, agentpay.MaxPageSize)
	for i := range page {
		page[i] = m.ID.String()
	}
	var d struct{ Nodes []*struct{ ID string } }
	api.do(t, m.Keys.TestSecretKey, q, map[string]any{"ids": page}).decode(t, &d)
	require.Len(t, d.Nodes, agentpay.MaxPageSize)
}

// TestMerchantListFieldsArePaged: Merchant.sessions and
// Merchant.webhookEvents show one bounded page (20 by default, at most 100),
// newest first, and follow a cursor of the matching connection.
func TestMerchantListFieldsArePaged(t *testing.T) {
	api := newMerchantAPI(t)
	m := api.register(t, "Pages", agentpay.MerchantInput{})
	key := m.Keys.TestSecretKey
	newest := reversed(api.createSessions(t, key, 25, time.Now().Add(-time.Hour)))

	type list struct {
		Merchant struct{ Sessions []struct{ ExternalID string } }
	}
	ids := func(l list) []string {
		out := make([]string, len(l.Merchant.Sessions))
		for i, s := range l.Merchant.Sessions {
			out[i] = s.ExternalID
		}
		return out
	}
	var l list
	api.do(t, key, `{ merchant { sessions { externalId } } }`, nil).decode(t, &l)
	require.Equal(t, newest[:agentpay.DefaultPageSize], ids(l))

	var conn struct {
		Sessions struct{ Edges []struct{ Cursor string } }
	}
	api.do(t, key, `{ sessions(first: 5) { edges { cursor } } }`, nil).decode(t, &conn)
	l = list{}
	api.do(t, key, `query($c: Cursor) { merchant { sessions(first: 5, after: $c) { externalId } } }`,
		map[string]any{"c": conn.Sessions.Edges[4].Cursor}).decode(t, &l)
	require.Equal(t, newest[5:10], ids(l))

	out := api.do(t, key, `{ merchant { sessions(first: 101) { externalId } } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", out.code(t))

	for range 22 {
		api.recordEvent(t, m.ID, false, "session.expired", newest[0])
	}
	var ev struct {
		Merchant struct{ WebhookEvents []struct{ ID string } }
	}
	api.do(t, key, `{ merchant { webhookEvents { id } } }`, nil).decode(t, &ev)
	require.Len(t, ev.Merchant.WebhookEvents, agentpay.DefaultPageSize)
	ev.Merchant.WebhookEvents = nil
	api.do(t, key, `{ merchant { webhookEvents(first: 3) { id } } }`, nil).decode(t, &ev)
	require.Len(t, ev.Merchant.WebhookEvents, 3)
}

// TestGraphQLCountsEveryField: each root field, aliases included, and each
// Me.balance and Me.limits counts one request against the agent's limit
// (T0: 10 a minute); fields inside one that counted do not count again.
// Public root fields count per client IP the same way.
func TestGraphQLCountsEveryField(t *testing.T) {
	// The service's clock stands still: every request falls into one window.
	api := newAgentAPI(t, agentAPIConfig{IPRateLimit: 3, Clock: clock.NewStub(time.Now())})
	reg := api.register(t, uniqueName(t, "cnt")) // one IP request

	out := api.do(t, reg.APIKey, `{ a: me { id wallets { id primary } } b: me { id } c: me { id } }`, nil)
	require.Empty(t, out.Errors)
	require.Equal(t, "7", out.Header.Get("X-RateLimit-Remaining"))

	out = api.do(t, reg.APIKey, `{ me { limits { tier } again: limits { tier } } }`, nil)
	require.Empty(t, out.Errors)
	require.Equal(t, "4", out.Header.Get("X-RateLimit-Remaining"))

	out = api.do(t, reg.APIKey, `mutation {
		a: send(input: {toUsername: "nobody_here", amountUsd: 1}) { status }
		b: send(input: {toUsername: "nobody_here", amountUsd: 1}) { status } }`, nil)
	require.Len(t, out.Errors, 2)
	for _, e := range out.Errors {
		require.NotEqual(t, "RATE_LIMITED", e.Extensions["code"], "refused for the recipient, but counted")
	}
	require.Equal(t, "2", out.Header.Get("X-RateLimit-Remaining"))

	out = api.do(t, reg.APIKey, `{ me { a: balance { totalUsd } b: balance { totalUsd } } }`, nil)
	require.Len(t, out.Errors, 1, "me and one balance are the last two requests: %s", out.Data)
	require.Equal(t, "RATE_LIMITED", out.Errors[0].Extensions["code"])

	out = api.do(t, "", `{ a: stats { agents } b: stats { agents } c: stats { agents } }`, nil)
	require.Len(t, out.Errors, 1, "the registration and two stats are this address's three requests")
	require.Equal(t, "RATE_LIMITED", out.Errors[0].Extensions["code"])
}

// introspectionQuery is graphql-js's getIntrospectionQuery(), what GraphiQL
// and code generators send.
const introspectionQuery = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType {
    kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }
}`

// TestIntrospectionOnlyWhenConfigured: off by default (422,
// INTROSPECTION_DISABLED; __typename still answers), and when on, the full
// introspection query passes every limit.
func TestIntrospectionOnlyWhenConfigured(t *testing.T) {
	api := newMerchantAPI(t)
	status, out := post(t, api.URL, nil, bytes.NewReader(operation(t, `{ __schema { queryType { name } } }`, nil)))
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, codeIntrospectionOff, out.code(t))
	status, out = post(t, api.URL, nil, bytes.NewReader(operation(t, introspectionQuery, nil)))
	require.Equal(t, http.StatusUnprocessableEntity, status)
	require.Equal(t, codeIntrospectionOff, out.code(t))
	status, out = post(t, api.URL, nil, bytes.NewReader(operation(t, `{ __typename }`, nil)))
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, out.Errors)

	srv := httptest.NewServer(NewHandler(HandlerConfig{Service: api.Svc, Introspection: true}))
	t.Cleanup(srv.Close)
	status, out = post(t, srv.URL, nil, bytes.NewReader(operation(t, introspectionQuery, nil)))
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, out.Errors)
	require.Contains(t, string(out.Data), `"name":"CheckoutSession"`)
}

// TestEveryListAndMutationHasACost: a list field added to the schema
// without a cost would count as one element however many it returns, and a
// mutation as a field read; the cost table (cost.go) must name each.
func TestEveryListAndMutationHasACost(t *testing.T) {
	es := NewExecutableSchema(Config{Resolvers: &Resolver{}, Complexity: complexity()})
	const child = 7
	for name, def := range es.Schema().Types {
		if def.Kind != ast.Object || strings.HasPrefix(name, "__") {
			continue
		}
		for _, f := range def.Fields {
			list := f.Type.Elem != nil || strings.HasSuffix(f.Type.Name(), "Connection")
			if strings.HasPrefix(f.Name, "__") || (!list && name != "Mutation") ||
				(strings.HasSuffix(name, "Connection") && f.Name == "edges") {
				continue // a connection's edges are costed by the field that pages them
			}
			args := map[string]any{}
			for _, a := range f.Arguments {
				switch {
				case a.Type.Elem != nil:
					args[a.Name] = []any{uuid.NewString()}
				case a.Type.Name() == "ID":
					args[a.Name] = uuid.NewString()
				case a.Type.Name() == "String":
					args[a.Name] = "x"
				}
			}
			cost, ok := es.Complexity(context.Background(), name, f.Name, child, args)
			require.True(t, ok, "%s.%s has no cost in cost.go", name, f.Name)
			if name == "Mutation" {
				require.GreaterOrEqual(t, cost, writeCost, "%s.%s", name, f.Name)
			} else {
				require.Greater(t, cost, child, "%s.%s costs its elements", name, f.Name)
			}
		}
	}
}

// TestWebsocketInitTimeout: a socket that sends no connection_init is
// closed once the init timeout passes.
func TestWebsocketInitTimeout(t *testing.T) {
	api := newMerchantAPI(t)
	srv := httptest.NewServer(NewHandler(HandlerConfig{Service: api.Svc, WebsocketInitTimeout: 200 * time.Millisecond}))
	t.Cleanup(srv.Close)
	c := dialWS(t, srv.URL, nil)
	_, err := c.read()
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "closed by the server, not by the test's read deadline: %v", err)
	require.Equal(t, "connection initialisation timeout", ce.Text)
}

// TestWebsocketMessageCap: a websocket message over 1 MiB closes the
// socket (1009, message too big) without being read.
func TestWebsocketMessageCap(t *testing.T) {
	api := newMerchantAPI(t)
	c := dialWS(t, api.URL, nil)
	c.init(map[string]any{})
	big := map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": "{ __typename }", "variables": map[string]any{"pad": strings.Repeat("x", httpx.MaxBodyBytes)}}}
	c.send(big)
	_, err := c.read()
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, websocket.CloseMessageTooBig, ce.Code)
}

// TestWebsocketOperationCap: one socket runs at most maxSocketOperations
// subscriptions at once; the next is refused (TOO_MANY_OPERATIONS) until
// one completes.
func TestWebsocketOperationCap(t *testing.T) {
	srv, _ := newChainServer(t)
	c := dialWS(t, srv.URL, nil)
	c.init(map[string]any{})
	sub := func(id string) {
		c.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{
			"query": `subscription { chainHead(name: "base") { head } }`}})
	}
	// next reads until a message about id.
	next := func(id string) wsMessage {
		for {
			m, err := c.read()
			require.NoError(t, err)
			if m.ID == id {
				return m
			}
		}
	}
	for i := 1; i <= maxSocketOperations; i++ {
		sub(fmt.Sprint(i))
		m := next(fmt.Sprint(i))
		require.Equal(t, "next", m.Type, string(m.Payload))
		require.NotContains(t, string(m.Payload), "errors")
	}
	sub("over")
	m := next("over")
	require.Contains(t, string(m.Payload), codeTooManyOps)

	c.send(map[string]any{"id": "1", "type": "complete"})
	require.Equal(t, "complete", next("1").Type)
	sub("again")
	m = next("again")
	require.Equal(t, "next", m.Type)
	require.NotContains(t, string(m.Payload), "errors", "a slot freed when a subscription completed")
}
