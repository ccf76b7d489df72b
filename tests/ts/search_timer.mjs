// The official TypeScript MCP SDK as a search client for the benchmarks (bench/mcp_clients.py).
//
//   node search_timer.mjs <base-url>
//
// Connects over SSE, lists the tools (so the SDK validates each result against the search
// tool's output schema, as a host built on it does), then reads one JSON query per line on
// stdin and writes, per query, the milliseconds its `search` (top_k 10) took on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import readline from "node:readline";

const [base] = process.argv.slice(2);
const client = new Client({ name: "mcpvectordb-bench", version: "1.0.0" });
await client.connect(new SSEClientTransport(new URL(base + "/sse")));
await client.listTools();
const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  const query = JSON.parse(line);
  const started = process.hrtime.bigint();
  const result = await client.callTool({ name: "search", arguments: { query, top_k: 10 } });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.isError || !result.structuredContent?.results?.length) {
    throw new Error(`search failed for ${JSON.stringify(query)}: ${JSON.stringify(result)}`);
  }
  process.stdout.write(`${ms}\n`);
}
await client.close();
