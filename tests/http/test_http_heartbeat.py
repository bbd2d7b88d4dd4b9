"""Progress heartbeats over Streamable HTTP (tests/unit/test_heartbeat.py has the rules, over stdio): a call with
a progressToken streams its beats over SSE and then its answer, in 2026-07-28 and in a legacy session; one that
cannot stream (no SSE accepted) or sent no token is answered as plain JSON. Order and counts, never timings."""

import json
import os

from heartbeat_tools import BEAT
from mcptest import ROOT, HttpServer, call, mcp_headers

TOOLS = os.path.join(ROOT, "tests", "heartbeat_tools.py")


def streamed(server, message, headers):
    """(the Content-Type, every SSE frame's message up to the answer, and whether anything came after it)."""
    connection = server.connection()
    try:
        connection.request("POST", server.path, body=json.dumps(message).encode(), headers=headers)
        response = connection.getresponse()
        kind = response.getheader("Content-Type", "")
        if not kind.startswith("text/event-stream"):
            return kind, [json.loads(response.read())], False
        frames = [json.loads(raw[6:]) for raw in response if raw.startswith(b"data: ") and raw[6:].strip()]
        answered = [i for i, frame in enumerate(frames) if frame.get("id") == message["id"]]
        return kind, frames, answered != [len(frames) - 1]
    finally:
        connection.close()


def beats_of(frames, token):
    progress = [f["params"] for f in frames if f.get("method") == "notifications/progress"]
    assert all(p["progressToken"] == token for p in progress)
    values = [p["progress"] for p in progress]
    assert all(later > earlier for earlier, later in zip(values, values[1:])), values
    return progress


def test_a_call_with_a_token_streams_its_beats_then_its_answer_and_nothing_after():
    with HttpServer(TOOLS) as server:
        message = call("silent", seconds=BEAT * 12)
        message["params"]["_meta"]["progressToken"] = "beat"
        kind, frames, after = streamed(server, message, mcp_headers(message))
        assert kind == "text/event-stream" and not after
        assert frames[-1]["result"]["content"][0]["text"] == "done"
        assert len(beats_of(frames, "beat")) >= 3


def test_no_token_or_no_stream_is_plain_json_without_beats():
    with HttpServer(TOOLS) as server:
        message = call("silent", seconds=BEAT * 6)
        kind, frames, _ = streamed(server, message, mcp_headers(message))
        assert kind == "application/json" and frames[0]["result"]["content"][0]["text"] == "done"
        message["params"]["_meta"]["progressToken"] = "beat"
        kind, frames, _ = streamed(server, message, dict(mcp_headers(message), Accept="application/json"))
        assert kind == "application/json" and "result" in frames[0]


def test_a_legacy_sessions_call_streams_its_beats():
    with HttpServer(TOOLS) as server:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        status, received, _ = server.post(initialize, headers=headers)
        assert status == 200
        headers.update({"Mcp-Session-Id": received["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"})
        status, _, _ = server.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        assert status == 202
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "sleeper", "arguments": {"seconds": BEAT * 10}, "_meta": {"progressToken": 5}}}
        kind, frames, after = streamed(server, message, headers)
        assert kind == "text/event-stream" and not after
        assert "result" in frames[-1] and len(beats_of(frames, 5)) >= 3
