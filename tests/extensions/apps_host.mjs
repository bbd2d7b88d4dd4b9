// An MCP Apps host for tests/extensions/test_apps_browser.py, built of the official pieces: an MCP client of our
// server over HTTP (@modelcontextprotocol/client), the AppBridge (@modelcontextprotocol/ext-apps), and the app's
// page in a sandboxed iframe of headless Chromium (playwright-core, Debian's chromium). The bridge runs here, the
// page in the browser; the host page relays their postMessage traffic. It does what a host does: finds the tool
// linked to an app, reads the app with resources/read, applies the Content Security Policy its _meta.ui asks
// for (none: the spec's restrictive default), calls the tool as the model would and hands the page its input
// and result, then clicks the page's button, whose tools/call the bridge forwards to our server.
// MODE is the client's version negotiation: "legacy" (initialize, as hosts in the field connect) or "auto"
// (server/discover: 2026-07-28).
//   node apps_host.mjs URL MODE CHROMIUM PROFILE SCREENSHOT      prints one line of JSON: what the page showed
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";
import { chromium } from "playwright-core";

const [url, mode, executablePath, profile, screenshot] = process.argv.slice(2);
const UI = "io.modelcontextprotocol/ui";
const client = new Client({ name: "apps-test-host", version: "1.0.0" },
  { capabilities: { extensions: { [UI]: { mimeTypes: ["text/html;profile=mcp-app"] } } },
    versionNegotiation: { mode } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const { tools } = await client.listTools();
const tool = tools.find((each) => getToolUiResourceUri(each) && each._meta.ui.visibility.includes("model"));
const read = await client.readResource({ uri: getToolUiResourceUri(tool) });
const app = read.contents[0];

// The spec's default when _meta.ui.csp is absent ("Host Behavior"), and what a declared csp adds to it.
const csp = app._meta?.ui?.csp ?? {};
const policy = ["default-src 'none'", `script-src 'self' 'unsafe-inline' ${(csp.resourceDomains ?? []).join(" ")}`,
  `style-src 'self' 'unsafe-inline' ${(csp.resourceDomains ?? []).join(" ")}`, "img-src 'self' data:",
  "media-src 'self' data:", `connect-src ${(csp.connectDomains ?? []).join(" ") || "'none'"}`,
  `frame-src ${(csp.frameDomains ?? []).join(" ") || "'none'"}`, "object-src 'none'"].join("; ");
const page = app.text.replace(/<head>/i, `<head><meta http-equiv="Content-Security-Policy" content="${policy}">`);

const browser = await chromium.launchPersistentContext(profile, { executablePath, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run"] });
const violations = [];
const fromApp = [];
try {
  const tab = browser.pages()[0] ?? await browser.newPage();
  tab.on("console", (message) => { if (/Content Security Policy/.test(message.text())) violations.push(message.text()); });
  const transport = {
    async start() {},
    async send(message) { await tab.evaluate((m) => window.toApp(m), message); },
    async close() {},
  };
  await tab.exposeBinding("toHost", (_, message) => {
    fromApp.push(message.method ?? "(answer)");
    transport.onmessage?.(message);
  });
  await tab.setContent(`<!DOCTYPE html><html><body>
    <iframe id="app" sandbox="allow-scripts" style="width:480px;height:320px;border:1px solid #888"></iframe>
    <script>
      const frame = document.getElementById("app");
      window.addEventListener("message", (event) => { if (event.source === frame.contentWindow) window.toHost(event.data); });
      window.toApp = (message) => frame.contentWindow.postMessage(message, "*");
    </script></body></html>`);
  const bridge = new AppBridge(client, { name: "apps-test-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, logging: {} });
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(transport);
  await tab.evaluate((html) => { document.getElementById("app").srcdoc = html; }, page);
  await initialized;

  const input = { count: 3, sides: 6 };
  const result = await client.callTool({ name: tool.name, arguments: input });  // as the model would
  await bridge.sendToolInput({ arguments: input });
  await bridge.sendToolResult(result);
  const view = tab.frameLocator("#app");
  await view.locator("#total").filter({ hasText: "total" }).waitFor({ timeout: 30000 });
  const first = { dice: await view.locator("#dice").textContent(), total: await view.locator("#total").textContent() };

  await view.locator("#roll").click();  // the page's own tools/call, through the bridge to our server
  await view.locator("#history").filter({ hasText: "rolls so far" }).waitFor({ timeout: 30000 });
  const again = { dice: await view.locator("#dice").textContent(), total: await view.locator("#total").textContent(),
    history: await view.locator("#history").textContent() };
  await tab.screenshot({ path: screenshot });
  console.log(JSON.stringify({ protocol: client.getNegotiatedProtocolVersion(),
    declared: client.getServerCapabilities()?.extensions?.[UI] ?? null, tool: tool.name, meta: tool._meta, app: { uri: app.uri, mimeType: app.mimeType,
    meta: app._meta ?? null }, policy, result: result.structuredContent, first, again, fromApp, violations }));
} finally {
  await browser.close();
  await client.close();
}
