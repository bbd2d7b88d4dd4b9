"""OpenTelemetry traces (mcpserver._tracing): every request a span in a real server process whose code configured
the real SDK (tests/traced_tools.py, with its in-memory exporter), continuing the caller's trace from `_meta`
(SEP-414) or the HTTP traceparent header; tool code's spans are its children; a server that does not use
OpenTelemetry imports none of it."""

import json
import os

import pytest
from mcptest import META, ROOT, HttpServer, StdioServer, call, mcp_headers, request

pytest.importorskip("opentelemetry.sdk", reason="the otel extra and opentelemetry-sdk are in the test extra only")

TRACED = os.path.join(ROOT, "tests", "traced_tools.py")
UNTRACED = os.path.join(ROOT, "tests", "untraced_tools.py")
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def spans_of(answer):
    return {span["name"]: span for span in answer["result"]["structuredContent"]["spans"]}


def with_meta(message, **extra):
    message["params"]["_meta"] = {**message["params"]["_meta"], **extra}
    return message


def test_over_stdio_a_call_continues_the_trace_in_meta_and_the_tools_spans_are_its_children():
    with StdioServer(TRACED) as server:
        message = with_meta(call("work", id=1, steps=2), traceparent=TRACEPARENT, tracestate="vendor=1")
        assert server.ask(message)["result"]["content"][0]["text"] == "worked"
        spans = spans_of(server.ask(call("spans", id=2)))
    request_span = spans["tools/call work"]
    assert request_span["trace_id"] == CALLER_TRACE and request_span["parent_id"] == CALLER_SPAN
    assert request_span["kind"] == "SERVER" and request_span["status"] == "UNSET"
    assert request_span["tracestate"] == "vendor=1"
    assert request_span["attributes"] == {"mcp.method.name": "tools/call", "mcp.protocol.version": "2026-07-28",
                                          "network.transport": "pipe", "jsonrpc.request.id": "1",
                                          "gen_ai.tool.name": "work", "gen_ai.operation.name": "execute_tool"}
    for step in ("step 0", "step 1"):
        assert spans[step]["trace_id"] == CALLER_TRACE and spans[step]["parent_id"] == request_span["span_id"]


def test_over_http_the_traceparent_header_is_continued_and_meta_wins_when_both_say():
    with HttpServer(TRACED) as server:
        message = call("work", id=1)
        assert server.post(message, headers={**mcp_headers(message), "traceparent": TRACEPARENT})[0] == 200
        other = "11111111111111111111111111111111"
        both = with_meta(call("work", id=2), traceparent=f"00-{other}-2222222222222222-01")
        assert server.post(both, headers={**mcp_headers(both), "traceparent": TRACEPARENT})[0] == 200
        spans = [span for span in server.post(call("spans", id=3))[2]["result"]["structuredContent"]["spans"]
                 if span["name"] == "tools/call work"]
    assert [(span["trace_id"], span["parent_id"]) for span in spans] == [(CALLER_TRACE, CALLER_SPAN),
                                                                          (other, "2222222222222222")]
    assert spans[0]["attributes"]["network.transport"] == "tcp"


def test_a_request_without_a_trace_starts_one_and_errors_say_so():
    with StdioServer(TRACED) as server:
        server.ask(call("work", id=1))
        assert "error" in server.ask(call("no_such_tool", id=2))
        assert server.ask(call("work", id=3, steps="many"))["result"]["isError"] is True
        server.ask(request("tools/list", id=4))
        spans = server.ask(call("spans", id=5))["result"]["structuredContent"]["spans"]
    by_id = {span["attributes"].get("jsonrpc.request.id"): span for span in spans if span["kind"] == "SERVER"}
    assert by_id["1"]["parent_id"] is None and by_id["1"]["status"] == "UNSET"
    assert by_id["2"]["name"] == "tools/call no_such_tool" and by_id["2"]["status"] == "ERROR"
    assert by_id["2"]["attributes"]["error.type"] == "-32602"
    assert by_id["2"]["attributes"]["rpc.response.status_code"] == "-32602"
    assert "rpc.response.status_code" not in by_id["3"]["attributes"]  # a tool's error is a result, not a code
    assert by_id["3"]["status"] == "ERROR" and by_id["3"]["attributes"]["error.type"] == "tool_error"
    assert by_id["4"]["name"] == "tools/list" and "gen_ai.tool.name" not in by_id["4"]["attributes"]
    assert len({span["trace_id"] for span in by_id.values()}) == 4  # each its own trace


def test_a_legacy_session_continues_the_trace_in_meta_too():
    with StdioServer(TRACED) as server:
        server.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
        server.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "work", "arguments": {}, "_meta": {"traceparent": TRACEPARENT}}})
        answer = server.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "spans"}})
    span = spans_of(answer)["tools/call work"]
    assert (span["trace_id"], span["parent_id"]) == (CALLER_TRACE, CALLER_SPAN)
    assert span["attributes"]["mcp.protocol.version"] == "2025-06-18"


def test_over_a_unix_socket_both_eras_continue_the_trace_in_meta_and_say_unix():
    import shutil
    import tempfile

    legacy = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    directory = tempfile.mkdtemp(prefix="mcpt")
    try:
        with HttpServer(TRACED, unix=os.path.join(directory, "t.sock")) as server:
            modern = with_meta(call("work", id=1), traceparent=TRACEPARENT)
            assert server.post(modern)[0] == 200
            _, headers, _ = server.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
                headers=legacy)
            session = {**legacy, "Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            other = "22222222222222222222222222222222"
            assert server.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "work", "arguments": {}, "_meta": {"traceparent": f"00-{other}-3333333333333333-01"}}},
                headers=session)[0] == 200
            spans = [span for span in server.post(call("spans", id=3))[2]["result"]["structuredContent"]["spans"]
                     if span["name"] == "tools/call work"]
    finally:
        shutil.rmtree(directory)
    assert [(span["trace_id"], span["parent_id"], span["attributes"]["mcp.protocol.version"]) for span in spans] == [
        (CALLER_TRACE, CALLER_SPAN, "2026-07-28"), (other, "3333333333333333", "2025-11-25")]
    assert {span["attributes"]["network.transport"] for span in spans} == {"unix"}


def test_a_task_tools_thread_opens_its_spans_under_the_request():
    extension = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    tasks = {**META, "io.modelcontextprotocol/clientCapabilities": extension}
    with StdioServer(TRACED) as server:
        created = server.ask(with_meta(request("tools/call", 1, meta=tasks, name="background", arguments={}),
                                       traceparent=TRACEPARENT))
        task_id = created["result"]["taskId"]
        for attempt in range(200):
            polled = server.ask(request("tasks/get", 10 + attempt, meta=tasks, taskId=task_id))
            if polled["result"]["status"] == "completed":
                break
        spans = spans_of(server.ask(call("spans", id=2)))
    assert spans["in the task"]["parent_id"] == spans["tools/call background"]["span_id"]
    assert spans["in the task"]["trace_id"] == CALLER_TRACE


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_server_that_does_not_use_opentelemetry_imports_none_of_it(transport):
    """The package is installed here (the test extra): the control is that the traced server does load it."""
    for target, expected in ((UNTRACED, False), (TRACED, True)):
        if transport == "stdio":
            with StdioServer(target) as server:
                loaded = server.ask(call("loaded"))["result"]["structuredContent"]["loaded"]
        else:
            with HttpServer(target) as server:
                loaded = server.post(call("loaded"))[2]["result"]["structuredContent"]["loaded"]
        assert bool(loaded) is expected, (target, loaded)
        assert ("mcpserver._tracing" in loaded) is False  # sanity: only opentelemetry's own names are listed


def test_the_in_process_client_traces_too_when_the_test_configured_opentelemetry():
    from mcpserver import Server
    from mcpserver.testing import Client
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    server = Server("in-process", "1.0.0")
    seen = []

    @server.tool()
    def current() -> str:
        from opentelemetry import trace

        seen.append(trace.get_current_span().get_span_context().trace_id)
        return "ok"

    from opentelemetry import trace

    tracer_before = trace._TRACER_PROVIDER  # the global provider can be set once per process: set it only if unset
    if tracer_before is None:
        trace.set_tracer_provider(provider)
    with Client(server) as client:
        assert client.call_tool("current", {}).text == "ok"
    assert seen and seen[0] != 0  # a real, recording span was current in the tool's thread
    if tracer_before is None:
        (span,) = [span for span in exporter.get_finished_spans() if span.name == "tools/call current"]
        assert span.context.trace_id == seen[0] and span.attributes["network.transport"] == "inproc"
