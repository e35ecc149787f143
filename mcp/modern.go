package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"agentpay/internal/httpx"
)

// The Go SDK (v1.8.0) speaks 2026-07-28 (stateless, per-request _meta,
// server/discover) and 2025-11-25 with initialize, but not the Tasks
// extension: this file serves that extension at the JSON-RPC layer
// (tasks/get, tasks/cancel, tasks/update, and the tool calls that may
// answer a task) and hands every other request to the SDK.
const (
	ProtocolVersion = "2026-07-28"
	// TasksExtension is the extension a held tool call answers with.
	TasksExtension = "io.modelcontextprotocol/tasks"

	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"

	// maxRequestBytes bounds one JSON-RPC request.
	maxRequestBytes = 1 << 20
	// taskPollInterval is the poll interval a task suggests: a human
	// deciding takes seconds at least.
	taskPollInterval = 2 * time.Second
)

// JSON-RPC error codes (2026-07-28's allocation).
const (
	codeInvalidRequest             = -32600
	codeMethodNotFound             = -32601
	codeInvalidParams              = -32602
	codeInternal                   = -32603
	codeUnsupportedProtocolVersion = -32022
	// codeOperationRefused is a held operation's end other than its
	// completion (denied, expired, refused when approved): implementation
	// defined range.
	codeOperationRefused = -32000
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  struct {
		Meta      map[string]json.RawMessage `json:"_meta"`
		Name      string                     `json:"name"`
		Arguments json.RawMessage            `json:"arguments"`
		TaskID    string                     `json:"taskId"`
	} `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// modern routes a request of the Tasks extension (servesTasks) to
// serveModern and anything else, unread, to legacy (the SDK).
func (t *toolset) modern(legacy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			legacy.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, httpx.ErrorBody{Detail: "request body too large"})
			return
		}
		var req rpcRequest
		if json.Unmarshal(body, &req) != nil || !servesTasks(&req) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			legacy.ServeHTTP(w, r)
			return
		}
		t.serveModern(w, r, &req)
	})
}

// servesTasks: a tasks/* request, or, from a 2026-07-28 client declaring
// the Tasks extension, a call of a tool that may wait for a human.
func servesTasks(req *rpcRequest) bool {
	switch req.Method {
	case "tasks/get", "tasks/cancel", "tasks/update":
		return true
	case "tools/call":
		def := toolByName(req.Params.Name)
		return def != nil && def.mayWait && req.Params.Meta[metaProtocolVersion] != nil && clientHasTasks(req.Params.Meta)
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (t *toolset) serveModern(w http.ResponseWriter, r *http.Request, req *rpcRequest) {
	answer := func(result any, e *rpcError) {
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if e != nil {
			msg["error"] = e
		} else {
			msg["result"] = result
		}
		writeJSON(w, http.StatusOK, msg)
	}
	if req.JSONRPC != "2.0" || len(req.ID) == 0 {
		answer(nil, &rpcError{Code: codeInvalidRequest, Message: "a JSON-RPC 2.0 request with an id"})
		return
	}
	if raw := req.Params.Meta[metaProtocolVersion]; raw != nil {
		var v string
		if json.Unmarshal(raw, &v) != nil || v != ProtocolVersion {
			answer(nil, &rpcError{Code: codeUnsupportedProtocolVersion, Message: "unsupported protocol version",
				Data: map[string]any{"supported": sdk.SupportedProtocolVersions(), "requested": json.RawMessage(raw)}})
			return
		}
	}
	ctx := r.Context()
	serverInfo := map[string]any{metaServerInfo: map[string]string{"name": "agentpay", "title": "agentpay agent wallet", "version": t.version}}
	a, _, err := t.svc.AuthenticateAndAllow(ctx, bearer(r.Header))
	if err != nil {
		_, detail := httpx.ErrorStatus(err, false)
		answer(nil, &rpcError{Code: codeInvalidRequest, Message: detail})
		return
	}
	switch req.Method {
	case "tools/call":
		def := toolByName(req.Params.Name)
		if def == nil {
			answer(nil, &rpcError{Code: codeInvalidParams, Message: "unknown tool " + req.Params.Name})
			return
		}
		out, err := def.invoke(ctx, t, a, req.Params.Arguments)
		if err != nil {
			answer(toolErrorResult(t.toolError(ctx, def.name, err).Error(), serverInfo), nil)
			return
		}
		if w, ok := out.(waitAnswer); ok && w.waitsFor() != "" && clientHasTasks(req.Params.Meta) {
			task, err := t.task(ctx, a, w.waitsFor(), false)
			if err != nil {
				answer(nil, t.rpcFailure(ctx, "tools/call", err))
				return
			}
			task["resultType"] = "task"
			task["_meta"] = serverInfo
			answer(task, nil)
			return
		}
		answer(toolResult(out, serverInfo), nil)
	case "tasks/get":
		task, err := t.task(ctx, a, req.Params.TaskID, true)
		if err != nil {
			answer(nil, t.rpcFailure(ctx, "tasks/get", err))
			return
		}
		task["resultType"] = "complete"
		task["_meta"] = serverInfo
		answer(task, nil)
	case "tasks/cancel", "tasks/update":
		// Cancelling is cooperative: a held operation is the human's to
		// decide, and an agent giving up waiting is never a denial, so
		// the approval stays as it is; update has no input to take (a
		// held operation never asks the client for any).
		if _, err := t.task(ctx, a, req.Params.TaskID, false); err != nil {
			answer(nil, t.rpcFailure(ctx, req.Method, err))
			return
		}
		answer(map[string]any{"resultType": "complete", "_meta": serverInfo}, nil)
	default:
		answer(nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + req.Method})
	}
}

func (t *toolset) rpcFailure(ctx context.Context, method string, err error) *rpcError {
	status, detail := httpx.ErrorStatus(err, false)
	if status == http.StatusInternalServerError {
		t.logger.ErrorContext(ctx, "mcp: "+method, "err", err)
		return &rpcError{Code: codeInternal, Message: detail}
	}
	return &rpcError{Code: codeInvalidParams, Message: detail}
}

func toolByName(name string) *toolDef {
	for i := range tools {
		if tools[i].name == name {
			return &tools[i]
		}
	}
	return nil
}

// clientHasTasks: the client declared the Tasks extension in this
// request's capabilities (a task is never answered to one that did not).
func clientHasTasks(meta map[string]json.RawMessage) bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(meta[metaClientCapabilities], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[TasksExtension]
	return ok
}

// toolResult and toolErrorResult are the SDK's results (jsonResult,
// errorResult: the one builder of a tool's answer for both protocol
// versions) in 2026-07-28's shape: a complete result with the server's
// _meta.
func toolResult(out any, serverInfo map[string]any) map[string]any {
	return completeResult(jsonResult(out, false), serverInfo)
}

func toolErrorResult(detail string, serverInfo map[string]any) map[string]any {
	return completeResult(errorResult(detail), serverInfo)
}

func completeResult(r *sdk.CallToolResult, serverInfo map[string]any) map[string]any {
	var m map[string]any
	b, err := json.Marshal(r)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil { // a tool's output is always JSON; keep the answer an error, never a panic
		m = map[string]any{"content": []any{map[string]string{"type": "text", "text": "internal error"}}, "isError": true}
	}
	m["resultType"] = "complete"
	m["_meta"] = serverInfo
	return m
}
