package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/httpx"
)

const instructions = "Tools of one agentpay agent: its USDC balance, sends to agents and humans, paying checkout sessions, its pairings and limits. Amounts are USD, exact decimals (USDC counts 1:1)."

// Config configures the handler.
type Config struct {
	Service *agentpay.Service
	Logger  *slog.Logger
	// Version is what the server calls itself in initialize ("dev" when
	// empty).
	Version string
}

// NewHandler is the /mcp endpoint: the agent's tools behind bearer
// authentication with the agent key.
func NewHandler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "agentpay", Title: "agentpay agent wallet", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions: instructions,
		// server/discover advertises the Tasks extension modern.go serves.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Extensions: map[string]any{TasksExtension: map[string]any{}}},
		Logger:       cfg.Logger,
	})
	t := &toolset{svc: cfg.Service, logger: cfg.Logger, version: cfg.Version}
	for _, def := range tools {
		def.add(server, t)
	}
	t.addPayX402(server)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: cfg.Logger,
	})
	return t.requireKey(t.modern(h))
}

// toolset is what the tools call.
type toolset struct {
	svc     *agentpay.Service
	logger  *slog.Logger
	version string
}

// bearer is the API key of an Authorization: Bearer header, "" without one.
func bearer(h http.Header) string {
	fields := strings.Fields(h.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		return ""
	}
	return fields[1]
}

// requireKey refuses a request without a valid agent key with REST's 401
// (the authentication cache makes the check one lookup per key and TTL);
// the tools authenticate again with the rate limit (agent).
func (t *toolset) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := t.svc.Authenticate(r.Context(), bearer(r.Header)); err != nil {
			status, detail := httpx.ErrorStatus(err, false)
			if status == http.StatusInternalServerError {
				t.logger.ErrorContext(r.Context(), "mcp: authenticating", "err", err)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentpay"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(httpx.ErrorBody{Detail: detail})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// agent authenticates a tool call's key and counts it against the agent's
// rate limit, as every REST request is counted.
func (t *toolset) agent(ctx context.Context, req *sdk.CallToolRequest) (*ent.Agent, error) {
	var key string
	if req.Extra != nil {
		key = bearer(req.Extra.Header)
	}
	a, _, err := t.svc.AuthenticateAndAllow(ctx, key)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// toolError is a refusal as the tool's error: REST's detail, never an
// internal error's text (logged instead).
func (t *toolset) toolError(ctx context.Context, tool string, err error) error {
	status, detail := httpx.ErrorStatus(err, false)
	if status == http.StatusInternalServerError {
		t.logger.ErrorContext(ctx, "mcp tool failed", "tool", tool, "err", err)
	}
	return errors.New(detail)
}
