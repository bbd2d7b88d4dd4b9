"""Progress heartbeats (mcpserver._heartbeat): a call whose client sent a progressToken hears notifications/progress
every N seconds while its tool is silent; the same token, values that only go up, the tool's own progress kept;
nothing once the call is answered or cancelled; no token, no beat. Real servers on real pipes (tests/http has the
same over sockets); what is asserted is order and counts with generous bounds, never how long anything took.
"""

import json
import math
import os
import sys

import pytest
from heartbeat_tools import BEAT
from mcpserver import ConfigError, Server
from mcpserver._loader import load_manifest
from mcptest import META, ROOT, StdioServer, call, line, request

TOOLS = os.path.join(ROOT, "tests", "heartbeat_tools.py")
TASKS = "io.modelcontextprotocol/tasks"


def with_token(message, token="beat"):
    message["params"]["_meta"] = dict(message["params"]["_meta"], progressToken=token)
    return message


def until_answered(server, message, *, send=True):
    """Send `message`; every notification that comes before its answer, and the answer."""
    if send:
        server.send(line(message))
    notes = []
    while True:
        incoming = server.receive()
        if incoming.get("id") == message["id"] and "method" not in incoming:
            return notes, incoming
        notes.append(incoming)


def progress_of(notes, token="beat"):
    progress = [n["params"] for n in notes if n.get("method") == "notifications/progress"]
    assert all(p["progressToken"] == token for p in progress), progress
    return progress


def rising(progress):
    values = [p["progress"] for p in progress]
    return all(later > earlier for earlier, later in zip(values, values[1:]))


def said(progress):
    """What the tool itself said: each progress whose message is not the one before it (a beat restates it)."""
    return [p for i, p in enumerate(progress) if "message" in p and (i == 0 or progress[i - 1].get("message")
                                                                      != p["message"])]


def nothing_more(server, token="beat"):
    """What the server sends while it answers two later requests, a few beats apart: no progress for `token`."""
    first = request("tools/list", id="after-1")
    notes, _ = until_answered(server, first)
    notes += until_answered(server, call("plain", id="after-2", seconds=BEAT * 4))[0]
    return [n for n in notes if n.get("params", {}).get("progressToken") == token]


def test_a_silent_call_with_a_token_hears_beats_then_nothing_once_answered():
    with StdioServer(TOOLS) as server:
        notes, answer = until_answered(server, with_token(call("silent", seconds=BEAT * 12)))
        assert answer["result"]["content"][0]["text"] == "done"
        beats = progress_of(notes)
        assert len(beats) >= 3 and beats[0] == {"progressToken": "beat", "progress": 0}
        assert rising(beats)
        assert nothing_more(server) == []


def test_no_token_no_beat_and_no_heartbeat_no_beat():
    with StdioServer(TOOLS) as server:
        notes, answer = until_answered(server, call("silent", seconds=BEAT * 8))
        assert "result" in answer and notes == []
        notes, answer = until_answered(server, with_token(call("plain", seconds=BEAT * 8)))
        assert "result" in answer and notes == []


def test_the_tools_own_progress_is_all_sent_and_beats_restate_it_a_step_higher():
    with StdioServer(TOOLS) as server:
        notes, _ = until_answered(server, with_token(call("reports", steps=4, pause=BEAT * 5)))
    progress = progress_of(notes)
    assert rising(progress)
    own = said(progress)
    assert [p["message"] for p in own] == ["step 0", "step 1", "step 2", "step 3"]
    assert [math.floor(p["progress"]) for p in own] == [0, 1, 2, 3]  # as the tool gave them (or a hair above)
    beats = [p for p in progress if not any(p is o for o in own)]
    assert len(beats) >= 3
    for beat in beats:  # the last thing the tool said, restated a hair higher (or 0, before it said anything)
        before = [p for p in own if p["progress"] < beat["progress"]]
        if before:
            assert (beat["message"], beat["total"]) == (before[-1]["message"], 4)
            assert math.floor(beat["progress"]) == math.floor(before[-1]["progress"])


def test_a_tool_that_reports_after_beats_goes_on_from_above_them():
    with StdioServer(TOOLS) as server:
        notes, _ = until_answered(server, with_token(call("late")))
    progress = progress_of(notes)
    assert rising(progress) and len(progress) >= 4
    assert [(p["message"], p["total"]) for p in said(progress)] == [("first", 2), ("second", 2), ("third", 2)]
    assert said(progress)[-1]["progress"] == 1  # lifted only while a beat was above it


def test_beats_racing_the_tools_own_progress_never_go_backwards_nor_lose_what_it_said(jitter):
    count = 3000 if jitter is None else jitter.randint(500, 5000)
    with StdioServer(TOOLS) as server:
        notes, answer = until_answered(server, with_token(call("chatty", count=count)))
    assert answer["result"]["content"][0]["text"] == "chatted"
    progress = progress_of(notes)
    assert rising(progress)
    assert [p["message"] for p in said(progress)] == [f"n={n}" for n in range(count)]  # none lost, in order


def test_a_cancel_racing_a_beat_leaves_nothing_after_it(jitter):
    with StdioServer(TOOLS) as server:
        for attempt in range(10):
            token = f"race-{attempt}"
            # waits stops at the cancel; silent sleeps on regardless, and must not be heard from again either
            started = with_token(call("waits", id=f"waits-{attempt}") if attempt % 2 else
                                 call("silent", id=f"silent-{attempt}", seconds=BEAT * 10), token)
            server.send(line(started))
            wait_for = 1 + (attempt % 3 if jitter is None else jitter.randint(0, 4))
            heard = 0
            while heard < wait_for:  # cancel just after a beat, or between two
                heard += server.receive()["params"]["progressToken"] == token
            server.send(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": started["id"], "reason": "racing a beat"}}))
            # The reader acts on the cancel before it reads what follows: whatever comes after this answer came
            # after the cancel, and none of it may be progress of the cancelled call, nor its answer.
            notes, _ = until_answered(server, request("tools/list", id=f"fence-{attempt}"))
            later = nothing_more(server, token)
            assert later == [], later
            assert all(n.get("id") != started["id"] for n in notes), notes


def test_a_legacy_session_hears_beats_too_without_the_message_2024_11_05_lacks():
    for revision in ("2025-06-18", "2024-11-05"):
        with StdioServer(TOOLS) as server:
            server.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            server.send(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "reports", "arguments": {"steps": 2, "pause": BEAT * 6}, "_meta": {"progressToken": 7}}}
            notes, answer = until_answered(server, message)
            progress = progress_of(notes, 7)
            assert "result" in answer and rising(progress) and len(progress) >= 4
            if revision == "2024-11-05":
                assert not any("message" in p for p in progress), progress
            else:
                assert [p["message"] for p in said(progress)] == ["step 0", "step 1"]


def test_a_command_tool_beats_and_a_manifest_sets_a_default_a_tool_may_turn_off(tmp_path):
    with StdioServer(TOOLS) as server:
        notes, answer = until_answered(server, with_token(call("sleeper", seconds=BEAT * 10)))
        assert answer["result"].get("isError") is not True, answer
        assert len(progress_of(notes)) >= 3
    program = [sys.executable, "-c", "import time; time.sleep(0.5)"]
    manifest = tmp_path / "beats.json"
    manifest.write_text(json.dumps({"name": "beats", "heartbeat": BEAT, "tools": [
        {"name": "default", "command": program}, {"name": "off", "command": program, "heartbeat": False}]}))
    with StdioServer(str(manifest)) as server:
        assert len(progress_of(until_answered(server, with_token(call("default")))[0])) >= 3
        assert until_answered(server, with_token(call("off")))[0] == []


def test_a_task_tool_beats_until_the_task_is_created_and_not_after():
    with_tasks = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}})
    with StdioServer(TOOLS) as server:
        message = with_token(request("tools/call", meta=with_tasks, name="as_task", arguments={"seconds": BEAT * 8}))
        notes, answer = until_answered(server, message)
        assert answer["result"]["resultType"] == "task" and len(progress_of(notes)) >= 2
        assert nothing_more(server) == []


@pytest.mark.parametrize("bad", [0, -1, 0.001, 3601, float("inf"), float("nan"), True, "20"])
def test_a_heartbeat_must_be_a_sensible_number_of_seconds(bad, tmp_path):
    server = Server("bad")
    with pytest.raises(ConfigError, match="heartbeat"):
        server.tool(name="t", heartbeat=bad)(lambda: "x")
    with pytest.raises(ConfigError, match="heartbeat"):
        server.command("c", ["true"], heartbeat=bad)
    with pytest.raises(ConfigError, match="heartbeat"):
        Server("bad", heartbeat=bad)
    assert server.tools == {}  # refused before anything is registered
    for manifest in ({"heartbeat": bad, "tools": []},
                     {"tools": [{"name": "c", "command": ["true"], "heartbeat": bad}]}):
        path = tmp_path / "m.json"
        path.write_text(json.dumps(manifest))
        with pytest.raises(ConfigError, match="heartbeat"):
            load_manifest(str(path))


def test_the_bounds_themselves_are_allowed_and_false_turns_a_default_off():
    server = Server("ok", heartbeat=20)
    server.tool(name="least", heartbeat=BEAT)(lambda: "x")
    server.tool(name="longest", heartbeat=3600)(lambda: "x")
    server.tool(name="off", heartbeat=False)(lambda: "x")
    server.tool(name="default")(lambda: "x")
    assert [server.tools[name].heartbeat for name in ("least", "longest", "off", "default")] == [
        BEAT, 3600, False, None]
    assert server.heartbeat == 20
