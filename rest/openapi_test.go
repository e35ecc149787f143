package rest

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"
)

// Routes NewRouter serves that the document leaves out on purpose: GraphQL
// and its playground have their own schema, and /dev/* exists only under
// `agentpay dev`.
var openAPIExcluded = []string{"/graphql", "/playground", "/dev/"}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, _ := loadOpenAPI(t) // parses and validates
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.True(t, doc.IsOpenAPI31OrLater())

	// Every operation answers JSON only (a 402 may be the Payment scheme's
	// RFC 9457 problem, application/problem+json: mpp.go), lists 500, and
	// each one under /agents/me requires the key and lists 401 and 429.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			require.NotEmpty(t, op.OperationID, name)
			for status, resp := range op.Responses.Map() {
				for ct := range resp.Value.Content {
					if status == "402" && ct == "application/problem+json" {
						continue
					}
					require.Equal(t, "application/json", ct, "%s %s", name, status)
				}
			}
			if strings.HasPrefix(path, "/agents") {
				require.NotNil(t, op.Responses.Status(http.StatusInternalServerError), name)
				require.NotNil(t, op.Responses.Status(http.StatusTooManyRequests), name)
			}
			if strings.HasPrefix(path, "/agents/me/") {
				require.NotNil(t, op.Security, name)
				require.Equal(t, []string{"AgentKey"}, keys((*op.Security)[0]), name)
				require.NotNil(t, op.Responses.Status(http.StatusUnauthorized), name)
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIDescribesEveryRoute walks the chi router: every route it serves
// is described (unless excluded above) and every described operation is
// served.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	h := NewRouter(Config{
		Service: newTestAPI(t, testAPIConfig{}).Svc,
		Logger:  discardLogger(),
		Dev:     true,
		Mounts:  map[string]http.Handler{"/graphql": http.NotFoundHandler(), "/playground": http.NotFoundHandler()},
	})
	routes, ok := h.(chi.Routes)
	require.True(t, ok, "NewRouter returns a chi router")

	served := map[string]bool{}
	require.NoError(t, chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(strings.ReplaceAll(route, "/*/", "/"), "/")
		for _, ex := range openAPIExcluded {
			if route == ex || strings.HasPrefix(route, ex) {
				return nil
			}
		}
		served[method+" "+route] = true
		return nil
	}))

	described := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described[method+" "+path] = true
		}
	}
	require.Equal(t, sortedKeys(served), sortedKeys(described))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIServed(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	resp := api.do(http.MethodGet, "/openapi.json", nil, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	require.JSONEq(t, string(OpenAPIDocument()), string(resp.Body))
}

// TestOpenAPIValidatorCatchesDrift shows the validator every REST test runs
// refuses what the document does not describe.
func TestOpenAPIValidatorCatchesDrift(t *testing.T) {
	doc, router := loadOpenAPI(t)
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	req := func(method, path string) *http.Request {
		r, err := http.NewRequest(method, "http://127.0.0.1:1"+path, nil)
		require.NoError(t, err)
		return r
	}
	for _, tt := range []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
		ok     bool
	}{
		{"described", req("GET", "/agents/check-username/alice"), 200, jsonCT, `{"username":"alice","available":true}`, true},
		{"described error", req("GET", "/agents/check-username/alice"), 400, jsonCT, `{"detail":"username: bad"}`, true},
		{"extra field", req("GET", "/agents/check-username/alice"), 200, jsonCT, `{"username":"alice","available":true,"x":1}`, false},
		{"missing field", req("GET", "/agents/check-username/alice"), 200, jsonCT, `{"username":"alice"}`, false},
		{"wrong type", req("GET", "/agents/check-username/alice"), 200, jsonCT, `{"username":"alice","available":"yes"}`, false},
		{"status not listed", req("GET", "/agents/check-username/alice"), 409, jsonCT, `{"detail":"x"}`, false},
		{"error shape", req("GET", "/agents/check-username/alice"), 400, jsonCT, `{"error":"x"}`, false},
		{"content type", req("GET", "/agents/check-username/alice"), 200, http.Header{"Content-Type": {"text/plain"}}, `{"username":"alice","available":true}`, false},
		{"unknown path", req("GET", "/agents/me/nothing/here"), 404, jsonCT, `{"detail":"not found"}`, false},
		{"unknown method", req("DELETE", "/agents/stats"), 405, jsonCT, `{"detail":"method not allowed"}`, false},
		{"amount as string", req("GET", "/agents/me/wallet/balance"), 200, http.Header{"Content-Type": {"application/json"}, "X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {"9"}, "X-Ratelimit-Reset": {"1"}},
			`{"agent_id":"6f1c2a4e-8a53-4a4e-9a43-2f7e4f1c2a4e","username":"a","balances":[],"total_usd":"1.5"}`, false},
		{"rate headers required on /agents/me", req("GET", "/agents/me/wallet/balance"), 200, jsonCT,
			`{"agent_id":"6f1c2a4e-8a53-4a4e-9a43-2f7e4f1c2a4e","username":"a","balances":[],"total_usd":1.5}`, false},
		{"429 needs Retry-After", req("GET", "/agents/stats"), 429, jsonCT, `{"detail":"rate limit exceeded"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOpenAPI(doc, router, tt.req, tt.status, tt.header, []byte(tt.body))
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
		})
	}
}
