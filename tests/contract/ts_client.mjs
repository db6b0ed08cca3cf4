// Drives `atlas-mcp serve` with the official TypeScript MCP client over stdio, as Claude Desktop,
// Cursor and other Node hosts do: node ts_client.mjs COMMAND ARGS... (MCP_TS_SDK: the SDK's
// package directory). Prints what the server answered as one JSON object.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = join(process.env.MCP_TS_SDK, "dist/esm/client");
const { Client } = await import(pathToFileURL(join(sdk, "index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "stdio.js")).href);

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "atlas-ts-check", version: "1.0.0" });
await client.connect(transport);
const call = (name, args) => client.callTool({ name, arguments: args });

const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
const fact = await call("write_memory", { text: "Nora keeps her bike in the shed behind the bakery", memory_type: "semantic" });
// One line larger than a pipe holds (~90 KB of UTF-8), both ways.
const long = "Le vélo de Nora, 猫の自転車 — ".repeat(1200).slice(0, 31000).trimEnd(); // the server keeps text as written, less outer spaces
const note = await call("write_memory", { text: long, memory_type: "episodic" });
const bike = await call("recall_memory", { query: "where do I keep my bike?" });
const all = await call("recall_memory", { query: "vélo 自転車", k: 100, min_relevance: 0 });
const typo = await call("recall_memory", { querry: "bike" });
console.log(JSON.stringify({ tools, fact, note, bike, all, typo, long_chars: long.length }));
await client.close();
