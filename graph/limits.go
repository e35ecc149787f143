package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"agentpay/internal/httpx"
)

// What one GraphQL request may make the server do, bounded before anything
// runs: the body (httpx.MaxBodyBytes, as every request), the query text and
// its tokens (parsing, and the parsed-query cache), the selection's depth
// and its fields after fragments are expanded (aliases count), and its
// complexity, an estimate of the work with list fields multiplied by their
// page size (cost.go). Websockets have their own bounds (websocket.go).
// docs/rate-limits.md has the figures and why.
const (
	// maxQueryBytes bounds a query document's text; documents are cached by
	// their text (queryCacheSize of them) and persisted queries too.
	maxQueryBytes = 64 << 10
	// maxQueryTokens bounds what the parser reads: a parsed document costs
	// about 110 bytes of memory per token.
	maxQueryTokens = 5000
	// queryCacheSize is how many parsed documents are kept (at most about
	// 70 MB at maxQueryTokens each; real clients send a few dozen shapes).
	queryCacheSize = 128
	// maxDepth bounds how deeply fields nest (introspection excepted: the
	// validator's MaxIntrospectionDepth bounds it). The deepest useful
	// query, sessions → payments → depositAddress → session → merchant, is
	// 10 deep.
	maxDepth = 12
	// maxFields bounds the fields an operation selects once its fragments
	// are expanded, aliases counted: the alias limit, and what keeps the
	// complexity walk linear. A full introspection query selects about 200.
	maxFields = 1000
	// maxComplexity bounds an operation's estimated cost (cost.go): a page
	// of 100 sessions with every field is about 4,000; a page of 100 inside
	// a page of 100 is refused.
	maxComplexity = 10_000
)

// Error codes of a refused operation. All but PAYLOAD_TOO_LARGE (413,
// before GraphQL reads the request) are protocol errors, like a query that
// does not validate: 422 over HTTP, an "error" message on a websocket.
const (
	codeQueryTooLarge    = "QUERY_TOO_LARGE"
	codeDepthLimit       = "DEPTH_LIMIT_EXCEEDED"
	codeIntrospectionOff = "INTROSPECTION_DISABLED"
	codeFieldLimit       = "FIELD_LIMIT_EXCEEDED"
	codeComplexityLimit  = "COMPLEXITY_LIMIT_EXCEEDED" // gqlgen's extension.ComplexityLimit
	codePayloadTooLarge  = "PAYLOAD_TOO_LARGE"
)

func init() {
	for _, code := range []string{codeQueryTooLarge, codeDepthLimit, codeFieldLimit, codeComplexityLimit, codeIntrospectionOff} {
		errcode.RegisterErrorType(code, errcode.KindProtocol)
	}
}

// limitBody caps the body of every request at httpx.MaxBodyBytes and reads
// it before gqlgen does (which would read any length): a larger body is
// refused with 413 and a GraphQL error, without being read past the cap.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpx.LimitBody(w, r) {
			writeTooLarge(w)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := io.ReadAll(r.Body)
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeTooLarge(w)
				return
			}
			if err != nil {
				http.Error(w, "could not read the request body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

func writeTooLarge(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = fmt.Fprintf(w, `{"errors":[{"message":%q,"extensions":{"code":%q}}]}`+"\n",
		httpx.ErrBodyTooLarge.Error(), codePayloadTooLarge)
}

// queryLimits refuses, before parsing, a query text over maxQueryBytes, and
// after validation an operation deeper than maxDepth or selecting more than
// maxFields, or one that introspects the schema when introspection is off.
// It runs before gqlgen's complexity limit, whose walk it keeps linear.
type queryLimits struct {
	introspection bool
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
	graphql.OperationContextMutator
} = queryLimits{}

func (queryLimits) ExtensionName() string                   { return "QueryLimits" }
func (queryLimits) Validate(graphql.ExecutableSchema) error { return nil }

func (queryLimits) MutateOperationParameters(_ context.Context, p *graphql.RawParams) *gqlerror.Error {
	if len(p.Query) > maxQueryBytes {
		err := gqlerror.Errorf("query must be at most %d bytes", maxQueryBytes)
		errcode.Set(err, codeQueryTooLarge)
		return err
	}
	return nil
}

func (l queryLimits) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	s := measure(oc.Operation.SelectionSet, false)
	switch {
	case s.introspects && !l.introspection:
		err := gqlerror.Errorf("introspection is disabled on this server")
		errcode.Set(err, codeIntrospectionOff)
		return err
	case s.fields > maxFields:
		err := gqlerror.Errorf("operation selects more than %d fields (fragments expanded, aliases counted)", maxFields)
		errcode.Set(err, codeFieldLimit)
		return err
	case s.depth > maxDepth:
		err := gqlerror.Errorf("operation nests fields %d deep, more than the limit of %d", s.depth, maxDepth)
		errcode.Set(err, codeDepthLimit)
		return err
	}
	return nil
}

// shape is what queryLimits measures of a selection set: how deeply its
// fields nest, how many fields it selects with fragments expanded, and
// whether it introspects the schema (__schema, __type; __typename is not
// introspection).
type shape struct {
	depth, fields int
	introspects   bool
}

// measure walks set with its fragments expanded; inside introspection
// (__schema, __type) fields do not add depth. It stops counting once past
// maxFields, so its work stays in proportion to maxFields even for a
// document whose fragments expand exponentially.
func measure(set ast.SelectionSet, introspection bool) shape {
	var out shape
	add := func(s shape) {
		out.depth = max(out.depth, s.depth)
		out.fields = min(out.fields+s.fields, maxFields+1)
		out.introspects = out.introspects || s.introspects
	}
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			intro := introspection || sel.Name == "__schema" || sel.Name == "__type"
			s := measure(sel.SelectionSet, intro)
			if !intro {
				s.depth++
			}
			s.fields++
			s.introspects = s.introspects || intro
			add(s)
		case *ast.InlineFragment:
			add(measure(sel.SelectionSet, introspection))
		case *ast.FragmentSpread:
			if sel.Definition != nil {
				add(measure(sel.Definition.SelectionSet, introspection))
			}
		}
		if out.fields > maxFields {
			break
		}
	}
	return out
}
