// Calls agentpay's /mcp with the official MCP TypeScript client 2.x
// (@modelcontextprotocol/client, protocol 2026-07-28 negotiated by
// server/discover), lists the tools and calls one. Run by
// TestMCPNodeClient2026:
//   MCP_URL=http://127.0.0.1:PORT/mcp AGENT_KEY=ak_... TOOL=get_balance ARGS='{}' node call.mjs
// It prints one JSON line: {"version", "discover", "tools", "result"}.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.AGENT_KEY}` } },
});
const client = new Client(
  { name: "agentpay-mcp-check", version: "0.1.0" },
  { versionNegotiation: { mode: "auto" } },
);
await client.connect(transport);
const discover = await client.discover();
const { tools } = await client.listTools();
const result = await client.callTool({ name: process.env.TOOL, arguments: JSON.parse(process.env.ARGS || "{}") });
console.log(JSON.stringify({
  version: client.getNegotiatedProtocolVersion?.() ?? null,
  discover,
  tools: tools.map((t) => t.name),
  result,
}));
await client.close();
