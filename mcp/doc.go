// Package mcp serves an agent's tools over the Model Context Protocol at
// /mcp (streamable HTTP, the official Go SDK), so an LLM client gets the
// agent's capabilities from one URL: get_balance, send, send_to_user,
// pay_checkout, list_pairings, get_limits (docs/agent-commerce.md).
//
// It translates and decides nothing: each tool calls the root Service as
// the REST handler of the same capability does, with the same limits, and
// a refusal is a tool error (isError) whose text is the detail REST would
// answer (rest.ErrorStatus says which text a client may see).
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
// The tool table (tools.go) is one entry per tool: a name, a description,
// typed input and output (their JSON schemas are inferred from the Go
// types, amounts as exact JSON numbers) and a call on the Service. Adding a
// tool, e.g. request_card_purchase once card purchases exist, is one entry
// and its two types.
package mcp
