package graph

// Fuzz target of the GraphQL endpoint. Seeds are in testdata/fuzz/<target>;
// `make fuzz` runs each target (docs/testing.md).

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"agentpay"
	"agentpay/internal/testenv"
)

// FuzzGraphQLRequest posts fuzzed request bodies (query, variables,
// operation name) to the GraphQL handler on a real service, as an agent, a
// merchant or anonymously. Whatever arrives, the answer is JSON and not a
// 5xx, and no resolver fails or panics (both would be logged and shown as
// an internal error).
func FuzzGraphQLRequest(f *testing.F) {
	var logs lockedLog
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ts := newTestServer(f, testenv.New(f, testenv.Options{}),
		agentpay.Config{Logger: logger, AgentMode: agentpay.ModeTest}, HandlerConfig{})
	svc := ts.Svc
	ctx := context.Background()
	reg, err := svc.QuickRegister(ctx, "fuzz_agent")
	if err != nil {
		f.Fatal(err)
	}
	name, email := "Fuzz Shop", "fuzz@shop.test"
	m, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	if err != nil {
		f.Fatal(err)
	}
	h := NewHandler(HandlerConfig{Service: svc, Logger: logger})

	f.Fuzz(func(t *testing.T, body []byte, as uint8, key string) {
		req := httptest.NewRequest(http.MethodPost, "http://api.test/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key == "" || strings.ContainsAny(key, "\r\n\x00") {
			key = map[uint8]string{1: reg.APIKey, 2: m.Keys.TestSecretKey, 3: m.Keys.LiveSecretKey}[as%4]
		}
		switch as % 4 {
		case 1:
			req.Header.Set("X-Agent-Key", key)
		case 2, 3:
			req.Header.Set("X-Checkout-Secret-Key", key)
		}
		logs.Reset()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("not JSON: %s", rec.Body)
		}
		if l := logs.String(); strings.Contains(l, "graphql panic") || strings.Contains(l, "graphql resolver failed") {
			t.Fatalf("%s\nanswered %s", l, rec.Body)
		}
	})
}

// lockedLog is the fuzzed handler's log, read after each request.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lockedLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}
