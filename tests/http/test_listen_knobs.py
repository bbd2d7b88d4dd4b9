"""--max-listen-seconds and --no-listen (docs/guides/production.md): a listen stream that ends on time with
the graceful result spec #3171 describes, over stdio and HTTP, a legacy session's GET stream bounded the same way,
and a static server that serves no streams and says so, in both eras. No test measures how long anything took:
each waits for the end to come, and counts what it was sent."""

import json
import os

import pytest
from mcpserver import Server, _deadlines
from mcpserver._context import Flight
from mcpserver.errors import ConfigError
from mcpserver.http import create_app
from mcptest import EXAMPLES, HttpServer, StdioServer, core_reply, line, mcp_headers, request

NOTES = os.path.join(EXAMPLES, "notes.py")
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def listen(request_id, **notifications):
    return request("subscriptions/listen", request_id, notifications=notifications)


def completion(request_id):
    """The graceful end of a listen stream (spec #3171): a completion result, its subscription in _meta."""
    return {"resultType": "complete", "_meta": {SUBSCRIPTION: request_id}}


def without_server_info(result):
    meta = {k: v for k, v in result["_meta"].items() if k != "io.modelcontextprotocol/serverInfo"}
    return {**result, "_meta": meta}


def sse_messages(response):
    """Every data frame of an SSE response, until the server ends it."""
    return [json.loads(raw[6:]) for raw in response.read().split(b"\n") if raw.startswith(b"data: ")]


def test_over_stdio_a_bounded_listen_ends_with_its_completion_result_and_the_cancel():
    with StdioServer(NOTES, "--max-listen-seconds", "0.5") as server:
        server.send(line(listen("bounded", toolsListChanged=True)))
        assert server.receive()["method"] == "notifications/subscriptions/acknowledged"
        ended = server.receive()  # nothing sent by the client: the server ends it
        assert ended["id"] == "bounded" and without_server_info(ended["result"]) == completion("bounded")
        assert server.receive() == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": "bounded", "reason": "the server ended the subscription"}}
        assert server.ask(request("tools/list", 2))["result"]["tools"]  # the server goes on


def test_over_http_a_bounded_listen_ends_gracefully_and_gives_its_slot_back():
    with HttpServer(NOTES, "--max-listen-seconds", "0.5", "--max-listeners-per-peer", "1") as server:
        for round_ in range(3):  # one slot per peer: each stream must have given it back for the next
            message = listen(f"s{round_}", toolsListChanged=True)
            connection = server.connection()
            connection.request("POST", server.path, body=json.dumps(message).encode(), headers=mcp_headers(message))
            response = connection.getresponse()
            assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
            ack, ended = sse_messages(response)  # read() returns: the server ended the response
            connection.close()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ended["id"] == f"s{round_}" and without_server_info(ended["result"]) == completion(f"s{round_}")


def initialize(server):
    status, headers, body = server.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        headers=LEGACY)
    assert status == 200, body
    return headers["mcp-session-id"], body["result"]["capabilities"]


def test_a_legacy_sessions_get_stream_ends_on_the_same_bound_and_the_session_goes_on():
    with HttpServer(NOTES, "--max-listen-seconds", "0.5") as server:
        session_id, _ = initialize(server)
        headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"}
        for _ in range(2):  # ended, then opened again, as a legacy client does
            connection = server.connection()
            connection.request("GET", server.path, headers=headers)
            response = connection.getresponse()
            assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
            assert sse_messages(response) == []  # it ends (read() returns) with nothing to say
            connection.close()
        status, _, body = server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                      headers={**LEGACY, "Mcp-Session-Id": session_id,
                                               "MCP-Protocol-Version": "2025-06-18"})
        assert status == 200 and body["result"]["tools"]


def test_with_no_listen_discover_and_initialize_promise_no_notifications_and_streams_are_refused():
    with HttpServer(NOTES, "--no-listen") as server:
        status, _, body = server.post(request("server/discover"))
        capabilities = body["result"]["capabilities"]
        assert status == 200 and capabilities["tools"] == {} and capabilities["resources"] == {}
        status, _, body = server.post(listen(2, toolsListChanged=True))
        assert status == 404 and body["error"]["code"] == -32601
        assert "serves no subscriptions/listen streams" in body["error"]["data"]["reason"]
        session_id, legacy_capabilities = initialize(server)
        assert "listChanged" not in json.dumps(legacy_capabilities) and "subscribe" not in json.dumps(
            legacy_capabilities)
        in_session = {**LEGACY, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"}
        status, _, body = server.post({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe",
                                       "params": {"uri": "notes://todo"}}, headers=in_session)
        assert status == 200 and body["error"]["code"] == -32601
        status, headers, _ = server.post(None, headers={**in_session, "Accept": "text/event-stream"}, method="GET",
                                         body=b"")
        assert status == 405 and "POST" in headers["allow"]
        assert server.post(request("tools/list", 4))[0] == 200  # everything else is served


def test_with_no_listen_over_stdio_listen_is_method_not_found():
    with StdioServer(NOTES, "--no-listen") as server:
        assert server.ask(listen(1, toolsListChanged=True))["error"]["code"] == -32601
        assert server.ask(request("server/discover", 2))["result"]["capabilities"]["tools"] == {}


def test_ten_thousand_bounded_listens_opened_and_cancelled_cost_a_bounded_deadline_table():
    """An attacker opening and hanging up bounded listen streams in a loop: each leaves an entry until it
    would have come due, unless the table drops them; count the entries, not the time."""
    server = Server("bounded")
    server.tool(lambda: "x", name="noop")
    server.subscriptions.max_seconds = 3600.0  # none comes due during the test
    before = len(_deadlines._DEADLINES)
    for n in range(10_000):
        flight = Flight(lambda note: None)
        reply = core_reply(listen(n, toolsListChanged=True), server, flight=flight)
        assert reply.listening is not None
        flight.cancel()  # the client hung up
        reply.listening.close()
    assert len(server.subscriptions) == 0
    assert len(_deadlines._DEADLINES) - before <= 2 * 65  # dropped as they are cancelled, not kept for an hour


def test_create_app_takes_both_knobs_and_refuses_a_bound_that_is_no_duration():
    server = Server("knobs")
    create_app(server, max_listen_seconds=30, listen=False)
    assert server.subscriptions.max_seconds == 30 and server.subscriptions.enabled is False
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="max_listen_seconds"):
            create_app(Server("bad"), max_listen_seconds=bad)
