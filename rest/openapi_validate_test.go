package rest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"
)

var openAPIOnce struct {
	sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

// loadOpenAPI parses and validates the embedded document once per test
// binary, and builds a router over its paths. Servers are dropped so the
// router matches paths alone (the test server's host is random).
func loadOpenAPI(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	openAPIOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(openAPIDocument)
		if err != nil {
			openAPIOnce.err = err
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			openAPIOnce.err = err
			return
		}
		doc.Servers = nil
		openAPIOnce.doc = doc
		openAPIOnce.router, openAPIOnce.err = gorillamux.NewRouter(doc)
	})
	require.NoError(t, openAPIOnce.err, "openapi.json")
	return openAPIOnce.doc, openAPIOnce.router
}

// validateOpenAPI checks one exchange against the served OpenAPI document:
// the path and method must be described, the status must be listed for the
// operation, and the body must match the schema of the declared content type
// (headers the document requires must be present). An exchange the document
// does not describe fails the test.
func validateOpenAPI(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	doc, router := loadOpenAPI(t)
	require.NoError(t, checkOpenAPI(doc, router, req, resp.StatusCode, resp.Header, respBody))
}

// checkOpenAPI is validateOpenAPI's check, returning what does not match.
func checkOpenAPI(_ *openapi3.T, router routers.Router, req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s -> %d is not described in openapi.json: %w", req.Method, req.URL.Path, status, err)
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route, Options: opts,
		},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s -> %d does not match openapi.json: %w\nbody: %s", req.Method, req.URL.Path, status, err, body)
	}
	return nil
}
