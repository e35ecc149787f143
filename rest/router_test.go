package rest

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/httpx"
	"agentpay/internal/testenv"
)

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var out map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), rec.Body.String())
	return rec.Code, out
}

func TestRouterErrorsAreDetailJSON(t *testing.T) {
	svc := newTestAPI(t, testAPIConfig{}).Svc
	h := NewRouter(Config{
		Service: svc,
		Logger:  discardLogger(),
		Mounts: map[string]http.Handler{
			"/boom": http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("secret sk_live_abc") }),
		},
	})
	tests := []struct {
		method, path string
		status       int
		detail       string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, "not found"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "method not allowed"},
		{http.MethodGet, "/boom", http.StatusInternalServerError, "internal error"},
		{http.MethodPost, "/dev/faucet", http.StatusNotFound, "not found"}, // dev routes only under `agentpay dev`
		{http.MethodGet, "/dev/mail?to=ana@example.com", http.StatusNotFound, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			status, body := do(t, h, tt.method, tt.path, "")
			require.Equal(t, tt.status, status)
			require.Equal(t, map[string]any{"detail": tt.detail}, body)
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}})
	chain := env.EVM(chains.Base)
	svc := newTestAPI(t, testAPIConfig{Env: env}).Svc
	h := NewRouter(Config{Service: svc, Logger: discardLogger()})

	status, body := do(t, h, http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok", body["status"])

	status, body = do(t, h, http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "ready", body["status"])

	require.NoError(t, chain.Close())
	// Once the cached head is older than HEAD_CACHE_TTL (1 s), it is read
	// again and the chain found down.
	require.Eventually(t, func() bool {
		status, body = do(t, h, http.MethodGet, "/readyz", "")
		return status == http.StatusServiceUnavailable
	}, 10*time.Second, 50*time.Millisecond)
	require.Contains(t, body["detail"], "base")

	status, _ = do(t, h, http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, status, "the process is up even when a chain is not")
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name   string       `json:"name"`
		Amount httpx.Amount `json:"amount"`
	}
	tests := []struct {
		in      string
		wantErr string
	}{
		{`{"name":"a","amount":49.95}`, ""},
		{`{"name":"a","amount":"49.95"}`, "amount: must be a number"},
		{`{"name":"a","amount":null}`, "amount: must be a number"},
		{`{"name":1}`, "name: must be a string"},
		{`{"nam":"a"}`, "unknown field"},
		{`{"name":"a"`, "malformed JSON: unexpected end"},
		{`{"name":"a"} {}`, "one JSON object"},
		{``, "request body must be a JSON object"},
		{`[1]`, "must be a object"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader(tt.in)))
			var b body
			err := decodeJSON(req, &b)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, "49.95", b.Amount.String())
				out, err := json.Marshal(b.Amount)
				require.NoError(t, err)
				require.Equal(t, "49.95", string(out), "amounts are JSON numbers")
				return
			}
			require.Error(t, err)
			require.True(t, agentpay.IsValidation(err))
			require.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
