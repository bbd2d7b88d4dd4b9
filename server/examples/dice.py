"""Dice with a face: an MCP App (the io.modelcontextprotocol/ui extension) that shows a roll and rolls again.

    python -m mcpserver --http server/examples/dice.py

roll_dice is a tool like any other, whose results a host with MCP Apps shows in the page at ui://dice/roller
(a sandboxed iframe); the page's "Roll again" calls roll_dice back through the host, then roll_history, a tool
only the page may call (visibility ["app"]: the host keeps it from the model). A host without Apps just sees
roll_dice's text. The page speaks the host's JSON-RPC over postMessage itself, with no SDK and nothing from the
network, so the host's default Content Security Policy (no network at all) is all it needs.
"""

import random

from mcpserver import Server

server = Server("dice", "1.0.0")

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Dice</title>
<style>
  body { font-family: var(--font-sans, system-ui, sans-serif); color: var(--color-text-primary, #171717);
         background: var(--color-background-primary, #fff); margin: 1rem; }
  #dice { font-size: 3rem; letter-spacing: 0.4rem; min-height: 4rem; }
  button { font: inherit; padding: 0.4rem 1rem; }
</style>
</head>
<body>
<div id="dice" aria-live="polite"></div>
<p id="total"></p>
<button id="roll" disabled>Roll again</button>
<p id="history"></p>
<script>
// JSON-RPC 2.0 with the host over postMessage (SEP-1865, "Transport Layer"): requests, their answers, notifications.
const waiting = new Map();
let nextId = 1;
function request(method, params) {
  const id = nextId++;
  window.parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}
function notify(method, params) {
  window.parent.postMessage({ jsonrpc: "2.0", method, params }, "*");
}
window.addEventListener("message", (event) => {
  const message = event.data;
  if (event.source !== window.parent || !message || message.jsonrpc !== "2.0") return;
  if (!message.method && waiting.has(message.id)) {
    const { resolve, reject } = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error) reject(new Error(message.error.message)); else resolve(message.result);
  } else if (message.method === "ui/notifications/tool-result") {
    show(message.params);
  } else if (message.method && message.id !== undefined) {  // ping, ui/resource-teardown: nothing to clean up
    window.parent.postMessage({ jsonrpc: "2.0", id: message.id, result: {} }, "*");
  }
});

const FACES = ["\\u2680", "\\u2681", "\\u2682", "\\u2683", "\\u2684", "\\u2685"];
function show(result) {
  const rolled = result.structuredContent;
  if (result.isError || !rolled) {
    document.getElementById("dice").textContent = (result.content || [{}])[0].text || "";
    return;
  }
  document.getElementById("dice").textContent =
    rolled.rolls.map((value) => (rolled.sides === 6 ? FACES[value - 1] : value)).join(" ");
  document.getElementById("total").textContent = "total " + rolled.total;
}

async function rollAgain() {
  show(await request("tools/call", { name: "roll_dice", arguments: { count: 2, sides: 6 } }));
  const history = await request("tools/call", { name: "roll_history", arguments: {} });
  document.getElementById("history").textContent = history.content[0].text;
}

(async () => {
  await request("ui/initialize", { protocolVersion: "2026-01-26", appInfo: { name: "dice", version: "1.0.0" },
                                   appCapabilities: {} });
  notify("ui/notifications/initialized", {});
  const button = document.getElementById("roll");
  button.onclick = rollAgain;
  button.disabled = false;
})();
</script>
</body>
</html>
"""

server.app("ui://dice/roller", PAGE, name="dice", title="Dice roller", prefers_border=True,
           description="Shows the dice of a roll, and rolls again.")

ROLLS: list[int] = []  # the totals rolled, this process's


@server.tool(ui="ui://dice/roller", output_schema={
    "type": "object", "required": ["rolls", "sides", "total"],
    "properties": {"rolls": {"type": "array", "items": {"type": "integer"}}, "sides": {"type": "integer"},
                   "total": {"type": "integer"}}})
def roll_dice(count: int = 2, sides: int = 6) -> dict:
    """Roll dice and add them up; a host with MCP Apps shows the dice.

    Args:
        count: How many dice, 1 to 20.
        sides: Faces of each die, 2 to 100.
    """
    count, sides = max(1, min(count, 20)), max(2, min(sides, 100))
    rolls = [random.randint(1, sides) for _ in range(count)]
    ROLLS.append(sum(rolls))
    return {"rolls": rolls, "sides": sides, "total": sum(rolls)}


@server.tool(ui="ui://dice/roller", visibility=["app"])
def roll_history() -> str:
    """The totals rolled so far, for the page (the model is not shown this tool)."""
    return f"{len(ROLLS)} rolls so far: " + ", ".join(str(total) for total in ROLLS[-10:])
