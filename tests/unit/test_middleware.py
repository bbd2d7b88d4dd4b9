"""Middleware around every request (mcpserver._middleware): what it sees, in which order, how it refuses and adds
to an answer, that it cannot take the server down, and that it runs in both eras, for task tools, over stdio,
over HTTP and in-process. server/examples/middleware.py holds the production guide's three uses, run here for real."""

import json
import logging
import os
import sys

import pytest
from mcpserver import Context, Server
from mcpserver.auth import Principal
from mcpserver.errors import ConfigError, InvalidRequest
from mcpserver.testing import Client, ClientError
from mcptest import EXAMPLES, HttpServer, StdioServer, call, request

sys.path.insert(0, EXAMPLES)
import middleware as example


def a_server(seen):
    server = Server("mw", "1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool(task="optional")
    def slow(ctx: Context) -> str:
        return "done"

    @server.middleware
    def outer(call, proceed):
        seen.append(("outer in", call.method, call.name, call.transport, call.era))
        result = proceed()
        seen.append(("outer out", call.method))
        return result

    @server.middleware
    def inner(call, proceed):
        seen.append(("inner in", call.method))
        result = proceed()
        seen.append(("inner out", call.method))
        return result

    return server


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_first_registered_runs_outermost_and_sees_what_the_request_is(era):
    seen = []
    with Client(a_server(seen), era=era) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    calls = [entry for entry in seen if entry[1] == "tools/call"]
    revision = "2026-07-28" if era == "modern" else "2025-11-25"
    assert calls == [("outer in", "tools/call", "echo", "in-process", revision), ("inner in", "tools/call"),
                     ("inner out", "tools/call"), ("outer out", "tools/call")]


def test_it_runs_for_task_tools_and_the_tasks_methods():
    seen = []
    with Client(a_server(seen)) as client:
        assert client.call_tool("slow", {}, task=True).text == "done"
    methods = [entry[1] for entry in seen if entry[0] == "outer in"]
    assert methods[0] == "tools/call" and "tasks/get" in methods


def test_a_refusal_is_the_clients_error_in_its_eras_codes_and_the_handler_never_runs():
    ran = []
    server = Server("refusing", "1.0.0")

    @server.tool()
    def secret() -> str:
        ran.append(1)
        return "the secret"

    @server.middleware
    def refuse(call, proceed):
        if call.name == "secret":
            raise InvalidRequest("Invalid Request: not for you")
        return proceed()

    for era in ("modern", "legacy"):
        with Client(server, era=era) as client:
            with pytest.raises(ClientError) as refused:
                client.call_tool("secret", {})
            assert (refused.value.code, refused.value.message) == (-32600, "Invalid Request: not for you")
    assert ran == []


def test_add_meta_reaches_the_answer_and_the_middleware_sees_the_principal():
    server = Server("meta", "1.0.0")
    server.tool(lambda: "ok", name="ping_me")
    principals = []

    @server.middleware
    def stamp(call, proceed):
        principals.append(call.principal)
        call.add_meta("io.example/seen", call.method)
        return proceed()

    alice = Principal(subject="alice", client_id="app")
    with Client(server, principal=alice) as client:
        result = client.call_tool("ping_me", {})
    assert result.raw["_meta"]["io.example/seen"] == "tools/call"
    assert principals and all(principal is alice for principal in principals)


def test_a_middleware_that_raises_is_an_internal_error_and_the_next_request_is_served(caplog):
    server = Server("broken", "1.0.0")
    server.tool(lambda: "ok", name="fine")
    calls = []

    @server.middleware
    def flaky(call, proceed):
        calls.append(call.method)
        if len(calls) == 1:
            raise RuntimeError("a bug in the middleware")
        return proceed()

    with caplog.at_level(logging.ERROR), Client(server) as client:
        with pytest.raises(ClientError) as failed:
            client.call_tool("fine", {})
        assert failed.value.code == -32603
        assert client.call_tool("fine", {}).text == "ok"
    assert "a bug in the middleware" in caplog.text


def test_the_three_hook_kind_sees_result_and_error():
    from mcpserver import Middleware

    events = []

    class Hooks(Middleware):
        def before(self, call):
            events.append(("before", call.name))

        def after(self, call, result):
            events.append(("after", call.name))
            return {**result, "content": [{"type": "text", "text": "replaced"}]}

        def error(self, call, exception):
            events.append(("error", type(exception).__name__))

    server = Server("hooks", "1.0.0")
    server.tool(lambda: "ok", name="fine")
    server.middleware(Hooks())
    with Client(server) as client:
        assert client.call_tool("fine", {}).text == "replaced"
        with pytest.raises(ClientError):
            client.call_tool("missing", {})
    assert events == [("before", "fine"), ("after", "fine"), ("before", "missing"), ("error", "InvalidParams")]


def test_a_middleware_must_be_callable_and_none_costs_an_attribute():
    server = Server("plain", "1.0.0")
    assert server.middleware.run is None and len(server.middleware) == 0
    with pytest.raises(ConfigError, match="a middleware is a callable"):
        server.middleware("not a function")


# --- over real transports, with the production guide's example ----------------------------------------------

EXAMPLE = os.path.join(EXAMPLES, "middleware.py")


def test_over_stdio_the_example_audits_times_and_lists_every_tool_without_a_tenant():
    env = {"PYTHONPATH": EXAMPLES}
    with StdioServer(EXAMPLE, "--log-level", "info", env=env) as server:
        listed = server.ask(request("tools/list", id=1))
        answered = server.ask(call("add", id=2, a=2, b=3))
        server.wait_for_stderr("tools/call add by - over stdio: ok")
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["echo", "add", "shutdown_reactor"]
    assert answered["result"]["structuredContent"] == 5
    assert answered["result"]["_meta"]["io.example/elapsedMs"] >= 0
    assert "2026-07-28 tools/list  by - over stdio: ok" in server.stderr


def test_over_http_a_legacy_session_passes_through_it_too():
    with HttpServer(EXAMPLE, "--log-level", "info", env={"PYTHONPATH": EXAMPLES}) as http:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        status, headers, body = http.post(body=json.dumps(initialize).encode(),
                                          headers={"Content-Type": "application/json",
                                                   "Accept": "application/json, text/event-stream"})
        assert status == 200
        session = headers["mcp-session-id"]
        legacy_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo",
                                                                                      "arguments": {"text": "x"}}}
        status, _, body = http.post(body=json.dumps(legacy_call).encode(), headers={
            "Content-Type": "application/json", "Accept": "application/json", "Mcp-Session-Id": session,
            "MCP-Protocol-Version": "2025-06-18"})
        assert status == 200 and body["result"]["content"][0]["text"] == "x"
        http.wait_for_stderr("2025-06-18 tools/call echo by - over http: ok")


def test_the_tenant_allow_list_refuses_and_hides_other_tenants_tools_in_both_eras():
    globex = Principal(subject="bob", claims={"tenant": "globex"})
    for era in ("modern", "legacy"):
        with Client(example.server, principal=globex, era=era) as client:
            assert [tool["name"] for tool in client.list_tools()] == ["echo"]
            with pytest.raises(ClientError) as refused:
                client.call_tool("shutdown_reactor", {})
            assert refused.value.code == -32602 and refused.value.message == "Unknown tool: shutdown_reactor"
            assert client.call_tool("echo", {"text": "ok"}).text == "ok"
