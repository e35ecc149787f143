// Connects to agentpay's /mcp with the official MCP TypeScript SDK over
// streamable HTTP (as an LLM client would), lists the tools and pays a
// checkout session with pay_checkout. Run by TestMCPNodeClient:
//   MCP_URL=http://127.0.0.1:PORT/mcp AGENT_KEY=ak_... SESSION=cs_test_... node pay.mjs
// It prints one JSON line: {"tools": [...names], "schemas": {...}, "payment": structuredContent}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.MCP_URL);
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${process.env.AGENT_KEY}` } },
});
const client = new Client({ name: "agentpay-mcp-check", version: "0.1.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const result = await client.callTool({
  name: "pay_checkout",
  arguments: { external_id: process.env.SESSION, idempotency_key: "node-" + process.env.SESSION },
});
if (result.isError) {
  console.error(JSON.stringify(result.content));
  process.exit(1);
}
console.log(JSON.stringify({
  tools: tools.map((t) => t.name),
  schemas: Object.fromEntries(tools.map((t) => [t.name, t.inputSchema])),
  payment: result.structuredContent,
}));
await client.close();
