package rest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/internal/httpx"
)

// routeLike is a REST route as a message would spell it.
var routeLike = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) (/[A-Za-z0-9_{}./-]*)`)

// routesAllowedIn are the functions of the rules that may spell routes: the
// registration's endpoints map, which the spec (2.1) asks for.
var routesAllowedIn = map[string]bool{"agentEndpoints": true}

// TestNoRouteInTheRules: the rules (the root package's non-test files) spell
// no REST route in a string, since GraphQL and MCP clients get their
// messages too: a message names an agentpay.Action, which each facade
// renders (REST: httpx.RESTActions). The only routes there are the
// registration's endpoints map, and each of them, like each REST rendering
// of an action, is a route the router serves; every action has a REST
// rendering.
func TestNoRouteInTheRules(t *testing.T) {
	h := NewRouter(Config{Service: newTestAPI(t, testAPIConfig{}).Svc, Logger: discardLogger(), Dev: true})
	routes, ok := h.(chi.Routes)
	require.True(t, ok, "NewRouter returns a chi router")
	served := map[string]bool{}
	require.NoError(t, chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served[method+" "+strings.TrimSuffix(strings.ReplaceAll(route, "/*/", "/"), "/")] = true
		return nil
	}))
	require.True(t, served["POST /agents/me/wallet/send"], "the walk sees the routes: %v", served)

	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	allowed := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, _ := decl.(*ast.FuncDecl)
			ast.Inspect(decl, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				for _, m := range routeLike.FindAllStringSubmatch(s, -1) {
					where := fset.Position(lit.Pos()).String()
					if fn == nil || !routesAllowedIn[fn.Name.Name] {
						t.Errorf("%s: %q spells the REST route %q: name an agentpay.Action, which each facade renders", where, s, m[0])
						continue
					}
					allowed++
					require.True(t, s == m[0], "%s: an endpoint is a route alone, not %q", where, s)
					require.True(t, served[m[0]], "%s: %s is not a route the router serves", where, m[0])
				}
				return true
			})
		}
	}
	require.Equal(t, 6, allowed, "the scan finds the endpoints map's routes")

	for _, a := range agentpay.Actions {
		route, ok := httpx.RESTActions[a]
		require.True(t, ok, "action %s has no REST rendering", a)
		require.True(t, served[route], "%s renders as %s, which the router does not serve", a, route)
		require.NotContains(t, route, `"`, "a rendering stays JSON-safe inside a stored message")
	}
	require.Len(t, httpx.RESTActions, len(agentpay.Actions))
}
