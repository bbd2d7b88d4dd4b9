"""The SDKs' 1.x clients resume the streams a failing network cuts (2025-11-25 transports, "Resumability and
Redelivery"), with their own reconnection: a proxy cuts a call's POST stream mid-way and the session's GET stream
mid-burst, each client reconnects with Last-Event-ID (by GET, whatever opened the stream), and what the server
replays makes up exactly what was cut off: every progress notification once and in order, the call's result, every
resource update once and in order."""

import pytest
from client_tools import CuttingProxy, drive
from mcptest import RESUME_TOOLS, HttpServer

UPDATES = [f"res://r-{n}" for n in range(1, 11)]
# Events through before each cut: the priming one and 4 progress; the priming one and 2 updates.
POST_CUT, GET_CUT = 5, 3


@pytest.mark.parametrize("client", ["typescript-sdk-1", "python-sdk-1"])
def test_a_client_whose_streams_are_cut_resumes_them_and_misses_nothing(client):
    with HttpServer(RESUME_TOOLS) as server, \
            CuttingProxy(server.port, [(b'"name":"count"', POST_CUT), (b"GET ", GET_CUT)]) as proxy:
        report = drive(client, {"transport": "http", "url": f"http://127.0.0.1:{proxy.port}/mcp"}, [
            *({"op": "subscribe", "uri": uri} for uri in UPDATES),
            {"op": "call", "name": "count", "arguments": {"to": 20, "delay": 0.05}, "progress": True},
            {"op": "call", "name": "touch_each", "arguments": {"uris": UPDATES}},
            {"op": "sleep", "seconds": 4},  # the GET stream is reconnected (retry: 1000 ms) and replayed
        ], timeout=90)
        connections = proxy.connections()
        assert server.stop() == 0, server.stderr
    steps = report["steps"]
    assert all("error" not in step for step in steps), steps
    assert steps[len(UPDATES)]["result"]["content"][0]["text"] == "counted to 20"
    calls = [m for m in report["outgoing"] if m.get("method") == "tools/call"]
    token = calls[0]["params"]["_meta"]["progressToken"]
    progress = [m["params"]["progress"] for m in report["incoming"]
                if m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token]
    assert progress == list(range(1, 21)), progress  # the wire under the SDK: each once, in order
    results = [m for m in report["incoming"] if m.get("id") == calls[0]["id"] and "method" not in m]
    assert len(results) == 1
    updated = [m["params"]["uri"] for m in report["incoming"] if m.get("method") == "notifications/resources/updated"]
    assert updated == UPDATES, updated

    # The wire above the server: where each stream was cut, and what each resume carried.
    cut = [c for c in connections if c["cut"]]
    assert [(c["line"].split()[0], len(c["ids"])) for c in cut] == [("GET", GET_CUT), ("POST", POST_CUT)] or \
        [(c["line"].split()[0], len(c["ids"])) for c in cut] == [("POST", POST_CUT), ("GET", GET_CUT)], cut
    by_method = {c["line"].split()[0]: c for c in cut}
    resumed = {c["last_event_id"]: c for c in connections if c["last_event_id"]}
    call_resume = resumed[by_method["POST"]["ids"][-1]]
    assert len(call_resume["ids"]) == 20 - (POST_CUT - 1) + 1  # the 16 progress it missed, then the result
    get_resume = resumed[by_method["GET"]["ids"][-1]]
    assert len(get_resume["ids"]) == len(UPDATES) - (GET_CUT - 1)  # the 8 updates it missed
    print(f"{client}: POST stream cut after {POST_CUT} ids, {len(call_resume['ids'])} replayed; GET stream cut after "
          f"{GET_CUT} ids, {len(get_resume['ids'])} replayed; duplicates 0")
