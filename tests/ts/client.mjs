// The official TypeScript MCP SDK as a second, independent client of the gateway.
//
//   node client.mjs <sse|http> <base-url> <scenario> [json-arguments]
//
// Prints one JSON object on stdout with what the scenario saw; the Python test decides what
// is right. Scenarios:
//   contract  list the tools, call each of `calls` (json-arguments: [[tool, args], ...]) and
//             report each result (the SDK validates structured results against the tool's
//             outputSchema itself and throws when they disagree) or the error thrown; then
//             wait `wait_ms` (default 0) for whatever the client does after, errors included
//   cancel    start `tool` with `args`, abort it after `after_ms`, wait `wait_ms`; report the
//             errors the client raised (a response for a cancelled id shows up here)
//   logging   set the log level, call `tool` with `args`; report the log notifications
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [kind, base, scenario, raw] = process.argv.slice(2);
const input = raw ? JSON.parse(raw) : {};

function transportFor() {
  if (kind === "sse") return new SSEClientTransport(new URL(base + "/sse"));
  return new StreamableHTTPClientTransport(new URL(base + "/mcp"));
}

const errors = [];
const client = new Client({ name: "mcpvectordb-ts-test", version: "1.0.0" });
client.onerror = (error) => errors.push(String(error && error.message ? error.message : error));
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (note) => {
  logs.push(note.params);
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function contract() {
  const listed = await client.listTools();
  const results = [];
  for (const [name, args] of input.calls || []) {
    try {
      const result = await client.callTool({ name, arguments: args });
      results.push({ name, isError: Boolean(result.isError), structured: result.structuredContent ?? null });
    } catch (error) {
      results.push({ name, thrown: String(error.message || error), code: error.code ?? null });
    }
  }
  await sleep(input.wait_ms ?? 0);
  return {
    capabilities: client.getServerCapabilities(),
    version: client.getServerVersion(),
    tools: listed.tools,
    results,
  };
}

async function cancel() {
  const controller = new AbortController();
  const call = client
    .callTool({ name: input.tool, arguments: input.args }, undefined, { signal: controller.signal })
    .then(() => "completed", (error) => `rejected: ${error.message || error}`);
  await sleep(input.after_ms ?? 300);
  controller.abort("the test cancels");
  const outcome = await call;
  await sleep(input.wait_ms ?? 1500);
  // The session still works after the cancellation.
  const after = await client.callTool({ name: "list_libraries", arguments: {} });
  return { outcome, errors, after_ok: !after.isError };
}

async function logging() {
  await client.setLoggingLevel(input.level || "info");
  const result = await client.callTool({ name: input.tool, arguments: input.args });
  await sleep(200);
  return { isError: Boolean(result.isError), structured: result.structuredContent ?? null, logs };
}

try {
  await client.connect(transportFor());
  const scenarios = { contract, cancel, logging };
  const report = await scenarios[scenario]();
  report.errors = errors;
  process.stdout.write(JSON.stringify(report));
  await client.close();
  process.exit(0);
} catch (error) {
  process.stdout.write(JSON.stringify({ fatal: String(error && error.stack ? error.stack : error), errors }));
  process.exit(1);
}
