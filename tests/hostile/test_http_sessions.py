"""Legacy sessions over Streamable HTTP (LEGACY.md §4) from the attacker's side: ids that are forged, foreign,
ended or replayed, answers nobody asked for, floods of sessions and of standalone streams. Each case is
answered as the spec says and the server goes on serving."""

import json
import socket

from mcptest import DEMO, HttpServer, request

LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def initialize(server, revision="2025-06-18", capabilities=None):
    status, headers, body = server.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": revision, "capabilities": capabilities or {}, "clientInfo": {"name": "x", "version": "1"}}},
        headers=LEGACY)
    assert status == 200 and body["result"]["protocolVersion"] == revision, body
    return headers["mcp-session-id"]


def in_session(server, session_id, message, method="POST", **extra):
    headers = {**LEGACY, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18", **extra}
    return server.post(message, headers=headers, method=method, body=None if message is not None else b"")


def test_initialize_without_any_mcp_header_opens_a_session_in_the_revision_asked():
    with HttpServer(DEMO) as server:
        session_id = initialize(server)
        assert all(0x21 <= ord(c) <= 0x7E for c in session_id)
        status, _, body = in_session(server, session_id, request("tools/list", meta={}))
        assert status == 200 and "resultType" not in body["result"] and body["result"]["tools"]


def test_forged_tampered_and_ended_sessions_are_404_and_the_session_is_then_gone():
    with HttpServer(DEMO) as server:
        session_id = initialize(server)
        body, _, mac = session_id.rpartition(".")
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for forged in ("abc", session_id + "x", body + "." + mac[::-1], "v1.e30.AAAA"):
            assert in_session(server, forged, listing)[0] == 404
        assert in_session(server, session_id, None, method="DELETE")[0] == 204
        assert in_session(server, session_id, listing)[0] == 404  # ended: a replay is refused too


def test_a_session_of_another_server_key_is_unknown():
    with HttpServer(DEMO, env={"MCPSERVER_STATE_KEY": "one key"}) as one, \
            HttpServer(DEMO, env={"MCPSERVER_STATE_KEY": "another key"}) as other:
        session_id = initialize(one)
        assert in_session(other, session_id, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})[0] == 404


def test_replicas_sharing_the_key_serve_each_others_sessions():
    with HttpServer(DEMO, env={"MCPSERVER_STATE_KEY": "shared"}) as one, \
            HttpServer(DEMO, env={"MCPSERVER_STATE_KEY": "shared"}) as two:
        session_id = initialize(one)
        status, _, body = in_session(two, session_id, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert status == 200 and body["result"]["tools"]


def test_initialize_twice_an_unasked_answer_and_a_wrong_version_header_are_refused():
    with HttpServer(DEMO) as server:
        session_id = initialize(server)
        again = in_session(server, session_id, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
        assert again[2]["error"]["code"] == -32600
        answer = {"jsonrpc": "2.0", "id": "mcpserver-1", "result": {"action": "accept"}}
        assert in_session(server, session_id, answer)[0] == 400  # the server never asked
        wrong = in_session(server, session_id, {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                           **{"MCP-Protocol-Version": "2025-11-25"})
        assert wrong[0] == 400 and wrong[2]["error"]["code"] == -32600
        assert in_session(server, session_id, {"jsonrpc": "2.0", "id": 4, "method": "ping"})[2]["result"] == {}


def test_a_modern_request_inside_a_session_is_served_as_2026_07_28():
    with HttpServer(DEMO) as server:
        session_id = initialize(server)
        modern = request("tools/list")
        headers = {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
        status, _, body = server.post(modern, headers=dict(LEGACY, **headers))
        assert status == 200 and body["result"]["resultType"] == "complete"


def open_stream(server, session_id):
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
                 f"Mcp-Session-Id: {session_id}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head.split(b"\r\n", 1)[0]


def test_a_client_flooding_standalone_streams_gets_503_and_everyone_else_is_served():
    with HttpServer(DEMO, "--max-listeners-per-peer", "4") as server:
        session_id = initialize(server)
        opened = [open_stream(server, session_id) for _ in range(6)]
        statuses = [status for _, status in opened]
        assert statuses.count(b"HTTP/1.1 200 OK") == 4 and statuses.count(b"HTTP/1.1 503 Service Unavailable") == 2
        assert in_session(server, initialize(server), {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})[0] == 200
        for sock, _ in opened:
            sock.close()


def test_fifteen_hundred_sessions_keep_a_bounded_state_and_the_first_still_works():
    """Opening a session stores nothing (its id carries it); the living states of sessions in use are at most
    MAX_SESSION_STATES (1000), the least recently used reclaimed, never refused."""
    with HttpServer(DEMO, "--log-level", "warning") as server:
        connection = server.connection()
        ids = []
        for n in range(1500):
            _, headers, _ = server.post({"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
                headers=LEGACY, connection=connection)
            ids.append(headers["mcp-session-id"])
            status, _, body = server.post({"jsonrpc": "2.0", "id": n, "method": "ping"}, connection=connection,
                                          headers=dict(LEGACY, **{"Mcp-Session-Id": ids[-1]}))
            assert status == 200 and body["result"] == {}
        status, _, body = server.post({"jsonrpc": "2.0", "id": "first", "method": "tools/list"}, connection=connection,
                                      headers=dict(LEGACY, **{"Mcp-Session-Id": ids[0]}))
        assert status == 200 and json.dumps(body).count('"name"') >= 3
        connection.close()
