// Drive a server with the official TypeScript SDK's 1.x client, and report what happened as JSON.
//
//     node ts_client.mjs < plan.json > report.json
//
// The plan and the report have the shape tests/clients/py_client.py uses (client_tools.plan builds
// them): the transport, the answers the client's handlers give, the steps; back come the negotiated
// revision, each step's outcome, what the server asked, and every JSON-RPC message in both
// directions, recorded at the transport, under the SDK, so a test can check the wire itself.
// It runs from the cache folder its packages are installed in (ES modules resolve from there).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const plan = JSON.parse(readFileSync(0, "utf8"));
const answers = plan.answers ?? {};
const wanted = plan.callbacks ?? ["elicit", "sample", "roots"];
const messages = []; // [direction, message], in order
const incoming = () => messages.filter(([d]) => d === "in").map(([, m]) => m);
const outgoing = () => messages.filter(([d]) => d === "out").map(([, m]) => m);
const asked = [];
const logs = [];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function record(transport) {
  // Protocol.connect sets onmessage and then calls start(): wrap both ends there, under the SDK.
  const start = transport.start.bind(transport);
  const send = transport.send.bind(transport);
  transport.start = async () => {
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      messages.push(["in", message]);
      deliver?.(message, extra);
    };
    return start();
  };
  transport.send = async (message, options) => {
    messages.push(["out", message]);
    return send(message, options);
  };
  return transport;
}

const transport = record(plan.transport === "stdio"
  ? new StdioClientTransport({ command: plan.command[0], args: plan.command.slice(1), cwd: plan.cwd,
                               env: plan.env ?? process.env, stderr: "inherit" })
  : new StreamableHTTPClientTransport(new URL(plan.url)));

const capabilities = {};
if (wanted.includes("elicit")) capabilities.elicitation = { form: {} };
if (wanted.includes("sample")) capabilities.sampling = {};
if (wanted.includes("roots")) capabilities.roots = { listChanged: true };
const client = new Client({ name: "ts-sdk-legacy-test", version: "1.0.0" }, { capabilities });

if (wanted.includes("elicit")) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push({ method: "elicitation/create", params: request.params });
    for (const [match, action, content] of answers.elicit ?? []) {
      if (request.params.message.includes(match)) return content === null ? { action } : { action, content };
    }
    return { action: "decline" };
  });
}
if (wanted.includes("sample")) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    asked.push({ method: "sampling/createMessage", params: request.params });
    return { role: "assistant", model: "test-model", content: { type: "text", text: answers.sample } };
  });
}
if (wanted.includes("roots")) {
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    asked.push({ method: "roots/list" });
    return { roots: answers.roots };
  });
}
client.setNotificationHandler(LoggingMessageNotificationSchema, async (notification) => {
  logs.push(notification.params);
});

function failure(error) {
  return { error: { type: error?.constructor?.name, message: String(error?.message ?? error), code: error?.code ?? null } };
}

async function cancel(step) {
  // Abort after `after` progress notifications (the SDK then sends notifications/cancelled), then
  // watch: the report marks where the cancel was sent and where the quiet window starts.
  const progress = [];
  const controller = new AbortController();
  const outcome = {};
  let enough;
  const reached = new Promise((resolve) => { enough = resolve; });
  const call = client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, {
    signal: controller.signal,
    onprogress: (p) => {
      progress.push([p.progress, p.total ?? null, p.message ?? null]);
      if (progress.length >= step.after) enough();
    },
  }).then((result) => { outcome.result = result; }, (error) => { outcome.error = String(error?.message ?? error); });
  let timer;
  await Promise.race([reached, new Promise((resolve) => { timer = setTimeout(resolve, 60000); })]);
  clearTimeout(timer); // a pending timer would keep the process alive after the report
  const request = outgoing().filter((m) => m.method === "tools/call").at(-1);
  controller.abort("test cancels");
  await call;
  const cancelledAt = incoming().length;
  await sleep((step.settle ?? 0.5) * 1000);
  const settledAt = incoming().length;
  await sleep((step.quiet ?? 1.0) * 1000);
  return { progress, request, outcome, cancelled_at: cancelledAt, settled_at: settledAt };
}

async function run(step) {
  try {
    if (step.op === "cancel") return await cancel(step);
    const progress = [];
    const onprogress = (p) => progress.push([p.progress, p.total ?? null, p.message ?? null]);
    switch (step.op) {
      case "call":
        return { result: await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined,
                                               step.progress ? { onprogress } : {}), progress };
      case "list_tools": return { result: await client.listTools() };
      case "list_resources": return { result: await client.listResources() };
      case "list_templates": return { result: await client.listResourceTemplates() };
      case "read": return { result: await client.readResource({ uri: step.uri }) };
      case "list_prompts": return { result: await client.listPrompts() };
      case "get_prompt": return { result: await client.getPrompt({ name: step.name, arguments: step.arguments }) };
      case "complete":
        return { result: await client.complete({ ref: { type: "ref/prompt", name: step.prompt }, argument: step.argument }) };
      case "set_level": return { result: await client.setLoggingLevel(step.level) };
      case "subscribe": return { result: await client.subscribeResource({ uri: step.uri }) };
      case "sleep": await sleep(step.seconds * 1000); return { result: {} };
      case "ping": return { result: await client.ping() };
      default: throw new Error(`unknown step ${step.op}`);
    }
  } catch (error) {
    return failure(error); // the test reads the error; one failed step does not hide the others
  }
}

const started = Date.now();
const manifest = new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url);
const report = { sdk: JSON.parse(readFileSync(manifest, "utf8")).version, steps: [] };
await client.connect(transport);
const initialized = incoming().find((m) => m.id !== undefined && m.result?.protocolVersion !== undefined);
Object.assign(report, { protocolVersion: initialized?.result.protocolVersion, serverInfo: client.getServerVersion(),
                        capabilities: client.getServerCapabilities(), instructions: client.getInstructions() ?? null });
for (const step of plan.steps) report.steps.push(await run(step));
await client.close();
Object.assign(report, { asked, logs, incoming: incoming(), outgoing: outgoing(), seconds: (Date.now() - started) / 1000 });
process.stdout.write(JSON.stringify(report));
