"""CORS from a real page in headless Chromium served from another origin (docs/guides/production.md): the
page of an origin named by --allow-origin completes a tools/call, reads the headers it acts on and runs a legacy
session; a page of any other origin is stopped by the browser itself, its script seeing a TypeError, after the
server refused its preflight. What is asserted is what the page's script saw, and what the server's access log
says it answered: no browser is mocked, and no timing is measured."""

import json
import queue
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mcpserver.http._cors import Cors
from mcptest import DEMO, HttpServer

pytestmark = pytest.mark.host_only("drives headless Chromium, which the lab's images do not carry")

TOKEN = "a-token-the-page-holds"
PAGE = """<!doctype html><title>MCP from a page</title><script>
const mcp = %(mcp)s, token = %(token)s, results = {};
const meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {}};
function post(headers, message) {
  return fetch(mcp, {method: "POST", body: JSON.stringify(message), headers: Object.assign({
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, headers)});
}
async function steps() {
  const called = await post({"Authorization": "Bearer " + token, "MCP-Protocol-Version": "2026-07-28",
                             "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
                            {jsonrpc: "2.0", id: 1, method: "tools/call",
                             params: {_meta: meta, name: "echo", arguments: {text: "from a page"}}});
  results.call = {status: called.status, body: await called.json()};
  if (%(only_call)s) return;
  const anonymous = await post({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
                               {jsonrpc: "2.0", id: 2, method: "tools/list", params: {_meta: meta}});
  results.anonymous = {status: anonymous.status, challenge: anonymous.headers.get("WWW-Authenticate")};
  const opened = await post({"Authorization": "Bearer " + token},
      {jsonrpc: "2.0", id: 3, method: "initialize", params: {protocolVersion: "2025-06-18", capabilities: {},
                                                            clientInfo: {name: "a page", version: "1"}}});
  const session = opened.headers.get("Mcp-Session-Id");
  results.initialize = {status: opened.status, session: session !== null};
  const inSession = {"Authorization": "Bearer " + token, "Mcp-Session-Id": session,
                     "MCP-Protocol-Version": "2025-06-18"};
  const listed = await post(inSession, {jsonrpc: "2.0", id: 4, method: "tools/list"});
  results.listed = {status: listed.status, tools: (await listed.json()).result.tools.length};
  const ended = await fetch(mcp, {method: "DELETE", headers: inSession});
  results.ended = ended.status;
}
steps().catch(error => { results.error = error.name + ": " + error.message; })
       .finally(() => fetch("/report", {method: "POST", body: JSON.stringify(results)}));
</script>"""


class PageServer:
    """The pages' own origin: serves the page for any Host (Chromium maps the test names here) and takes the
    page's report of what its script saw."""

    def __init__(self) -> None:
        self.page = ""
        self.reports: queue.Queue[dict] = queue.Queue()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = owner.page.encode()
                self.send_response(200 if self.path == "/page.html" else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                owner.reports.put(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:  # `make test` installs it: a missing browser is a failure, not a skip
        pytest.fail("headless Chromium is needed: `make lab-browser` (apt-get install chromium)")
    return found


@pytest.fixture
def pages():
    server = PageServer()
    yield server
    server.http.shutdown()
    server.http.server_close()


def visit(chromium: str, pages: PageServer, origin: str, mcp: str, profile: Path, only_call: bool) -> dict:
    """What the page's script saw, loaded from `origin` in a fresh headless Chromium."""
    pages.page = PAGE % {"mcp": json.dumps(mcp), "token": json.dumps(TOKEN), "only_call": json.dumps(only_call)}
    browser = subprocess.Popen([
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP allowed.test 127.0.0.1, MAP other.test 127.0.0.1",
        f"{origin}/page.html"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return pages.reports.get(timeout=120)
    finally:
        browser.kill()
        browser.wait()


def answered(server: HttpServer, since: int) -> list[str]:
    """The access log's requests to the endpoint since `since` characters of stderr: 'METHOD STATUS'."""
    import re

    return [" ".join(found) for found in re.findall(r'"(\w+) /mcp" (\d{3}) ', server.stderr[since:])]


def test_a_named_origins_page_calls_a_tool_and_every_other_page_is_stopped_by_the_browser(chromium, pages,
                                                                                         tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    allowed = f"http://allowed.test:{pages.port}"
    with HttpServer(DEMO, "--token-file", str(token), "--allow-origin", allowed) as server:
        seen = visit(chromium, pages, allowed, server.url, tmp_path / "allowed", only_call=False)
        assert "error" not in seen, seen
        assert seen["call"]["status"] == 200
        assert seen["call"]["body"]["result"]["content"][0]["text"] == "from a page"
        assert seen["anonymous"] == {"status": 401, "challenge": 'Bearer realm="mcp"'}  # exposed to the page
        assert seen["initialize"] == {"status": 200, "session": True}  # Mcp-Session-Id exposed
        assert seen["listed"]["status"] == 200 and seen["listed"]["tools"] > 0
        assert seen["ended"] == 204

        for name, origin, refusal in (("a name not allowed", f"http://other.test:{pages.port}", "403"),
                                      ("loopback, let through but not named", f"http://127.0.0.1:{pages.port}",
                                       "405")):
            since = len(server.stderr)
            seen = visit(chromium, pages, origin, server.url, tmp_path / name.split()[0], only_call=True)
            assert seen == {"error": "TypeError: Failed to fetch"}, (name, seen)
            server.wait_for_stderr('"OPTIONS /mcp"', times=server.stderr.count('"OPTIONS /mcp"'))
            assert answered(server, since) == [f"OPTIONS {refusal}"], name  # the preflight failed; no POST came


def environ(origin: str, method: str = "OPTIONS", path: str = "/mcp", **headers: str) -> dict:
    return {"HTTP_ORIGIN": origin, "REQUEST_METHOD": method, "PATH_INFO": path,
            **{"HTTP_" + key.upper(): value for key, value in headers.items()}}


def test_a_preflight_grants_the_mcp_headers_and_tools_parameters_and_nothing_else():
    cors = Cors({"https://app.example"}, "/mcp")
    asked = "content-type, mcp-protocol-version, mcp-method, mcp-name, authorization, mcp-session-id, " \
            "last-event-id, mcp-param-region, x-forwarded-for, mcp-param-"
    answer = cors.preflight(environ("https://app.example", access_control_request_method="POST",
                                    access_control_request_headers=asked))
    granted = dict(answer.headers)
    assert answer.status == 204 and granted["Access-Control-Allow-Methods"] == "POST, GET, DELETE"
    assert granted["Access-Control-Allow-Headers"].split(", ") == [
        "content-type", "mcp-protocol-version", "mcp-method", "mcp-name", "authorization", "mcp-session-id",
        "last-event-id", "mcp-param-region"]
    assert cors.preflight(environ("https://evil.example", access_control_request_method="POST")) is None
    assert cors.preflight(environ("https://app.example")) is None  # an OPTIONS that is no preflight
    assert cors.headers(environ("https://app.example", "POST", "/.well-known/oauth-protected-resource")) == []
    assert dict(cors.headers(environ("https://app.example/", "POST")))["Access-Control-Allow-Origin"] == \
        "https://app.example/"
