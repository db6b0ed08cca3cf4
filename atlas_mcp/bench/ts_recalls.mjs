// `atlas-mcp bench --ts-client`: recalls through the official TypeScript MCP client (the SDK Node
// hosts embed) over stdio, timed as the Python client times them (bench/measure.py).
// usage: MCP_TS_SDK=<@modelcontextprotocol/sdk dir> node ts_recalls.mjs QUERIES.json COMMAND ARGS...
// QUERIES.json: {"warmup": [...], "queries": [...]}. Prints one JSON line: the milliseconds of
// each timed recall, the server's CPU seconds before and after them (/proc; null elsewhere) and
// this client's own CPU milliseconds over them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = join(process.env.MCP_TS_SDK, "dist/esm/client");
const { Client } = await import(pathToFileURL(join(sdk, "index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "stdio.js")).href);
const [queryFile, command, ...args] = process.argv.slice(2);
const { warmup, queries } = JSON.parse(readFileSync(queryFile, "utf8"));
const SETTLE_WINDOW_MS = 300; // as measure.settled: idle when it used at most one tick in this long
const SETTLE_LIMIT_MS = 20000;
const TICK_S = 0.01; // USER_HZ is 100 on Linux

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "atlas-bench", version: "1.0.0" });
await client.connect(transport);
await client.listTools(); // the client validates results against the output schemas it lists

function serverCpu() {
  try {
    const fields = readFileSync(`/proc/${transport.pid}/stat`, "utf8").split(")").pop().trim().split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_S;
  } catch {
    return null;
  }
}

async function recall(query) {
  const result = await client.callTool({ name: "recall_memory", arguments: { query } });
  if (result.isError) throw new Error(`recall_memory failed: ${JSON.stringify(result.content)}`);
}

for (const query of warmup) await recall(query);
let last = serverCpu();
const deadline = Date.now() + SETTLE_LIMIT_MS;
while (last !== null && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, SETTLE_WINDOW_MS));
  const now = serverCpu();
  if (now === null || now - last <= TICK_S + 1e-9) break;
  last = now;
}
const cpuBefore = serverCpu();
const ownBefore = process.cpuUsage();
const ms = [];
for (const query of queries) {
  const started = performance.now();
  await recall(query);
  ms.push(performance.now() - started);
}
const own = process.cpuUsage(ownBefore);
const cpuAfter = serverCpu();
console.log(JSON.stringify({ ms, server_cpu_s: [cpuBefore, cpuAfter], client_cpu_ms: (own.user + own.system) / 1000 }));
await client.close();
