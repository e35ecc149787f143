// Package mcp serves an agent's tools over the Model Context Protocol at
// /mcp (streamable HTTP, the official Go SDK), so an LLM client gets the
// agent's capabilities from one URL; the tools are the table in tools.go
// (TestMCPGoClient holds the list, docs/agent-commerce.md shows it).
//
// It translates and decides nothing: each tool calls the root Service as
// the REST handler of the same capability does, with the same limits, and
// answers the JSON REST answers, from the same types (internal/httpx's
// answer shapes; a money tool a spending policy may hold answers either
// REST's 200 body or its 202 body, the approval). A refusal is a tool
// error (isError) whose text is the detail REST would answer
// (httpx.ErrorStatus says which text a client may see).
//
// Authentication is the agent's API key as a bearer token on every HTTP
// request (Authorization: Bearer ak_...); without a valid one the request
// is 401 {"detail"} before the MCP layer sees it. Each tool call counts one
// request against the agent's rate limit (AuthenticateAndAllow, as every
// REST and GraphQL request does); protocol messages (initialize, tools/list)
// do not, as a REST client's connection setup does not.
//
// The server is stateless (no Mcp-Session-Id): every request carries its
// key and any instance answers it, so several `serve` processes behind a
// load balancer need no session affinity. Answers are JSON, not SSE: no
// tool streams.
//
// The SDK (v1.8.0) serves both 2026-07-28 (stateless, server/discover)
// and 2025-11-25 (initialize) on the URL, but not the Tasks extension:
// modern.go answers its requests at the JSON-RPC layer and hands every
// other one to the SDK. A tool call that waits for a human (one a
// spending policy holds, a card purchase) answers a Task to a client that
// declared the Tasks extension; the task is the stored row (the approval
// or the card request: its id, its state read on each tasks/get, the
// sources in tasks.go), so nothing about it lives in memory and a restart
// or another instance changes nothing; tasks/cancel is acknowledged and
// leaves the decision to the human, so a client giving up is never a
// denial.
//
// The tool table (tools.go) is one entry per tool: a name, a description,
// typed input and output (their JSON schemas are inferred from the Go
// types, amounts as exact JSON numbers) and a call on the Service. Adding a
// tool is one entry, its input type and, unless REST already answers the
// capability, its output type in internal/httpx.
package mcp
