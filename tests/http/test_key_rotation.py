"""Rotating the state key across replicas (docs/guides/sessions.md): an ordered key list, the first sealing and all of
them opening, so an input_required round's requestState and a legacy session id made by one replica are honoured
by the other at every step of a rolling change, and what a retired key sealed is refused as it always was."""

import os

import pytest
from mcpserver._state import Sealer, keys_from_environment
from mcpserver.errors import ConfigError
from mcptest import EXAMPLES, META, HttpServer

INTERACTIVE = os.path.join(EXAMPLES, "interactive.py")
LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
OLD, NEW = "old key of the replicas", "new key of the replicas"


def replica(*keys: str, variable: str = "MCPSERVER_STATE_KEYS") -> HttpServer:
    return HttpServer(INTERACTIVE, env={variable: ",".join(keys)})


def stopped(server: HttpServer) -> None:
    server.stop()
    server.__exit__(None, None, None)


def first_round(server: HttpServer) -> str:
    """trip_plan's first round on `server`: the requestState it seals."""
    meta = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
    status, _, body = server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"_meta": meta, "name": "trip_plan", "arguments": {}}})
    assert status == 200 and body["result"]["resultType"] == "input_required", body
    return str(body["result"]["requestState"])


def second_round(server: HttpServer, state: str) -> dict:
    """The answer to the first round, with its state, sent to `server`: its next question, or its refusal."""
    meta = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
    answers = {"where": {"action": "accept", "content": {"city": "Oslo"}}}
    status, _, body = server.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": meta, "name": "trip_plan", "arguments": {}, "inputResponses": answers, "requestState": state}})
    assert status == 200, body
    return dict(body)


def honoured(server: HttpServer, state: str) -> bool:
    body = second_round(server, state)
    if "error" in body:
        assert body["error"]["code"] == -32602 and body["error"]["data"] == {"reason": "invalid_request_state"}
        assert "its seal does not verify (tampered, or sealed with another key)" in body["error"]["message"]
        return False
    assert body["result"]["resultType"] == "input_required" and "days" in body["result"]["inputRequests"], body
    return True


def session(server: HttpServer) -> str:
    status, headers, body = server.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        headers=LEGACY)
    assert status == 200, body
    return headers["mcp-session-id"]


def serves_session(server: HttpServer, session_id: str) -> bool:
    status, _, body = server.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={
        **LEGACY, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"})
    assert status in (200, 404), (status, body)
    return status == 200 and bool(body["result"]["tools"])


def both_ways(a: HttpServer, b: HttpServer) -> list[bool]:
    """Whether each replica honours the other's requestState and session id, fresh from each."""
    return [honoured(b, first_round(a)), honoured(a, first_round(b)),
            serves_session(b, session(a)), serves_session(a, session(b))]


def test_a_rolling_rotation_breaks_nothing_in_flight_and_the_retired_key_then_opens_nothing():
    """Two replicas, restarted one at a time: [old] everywhere; the new key added where it only opens
    ([old, new]); promoted to seal ([new, old]); the old one retired ([new]) once what it sealed has expired.
    At every step each replica honours what the other made, and what was made before the step."""
    steps = [(OLD,), (OLD, NEW), (NEW, OLD), (NEW,)]
    a, b = replica(*steps[0]), replica(*steps[0])
    in_flight = [(first_round(a), session(a))]  # made before the rotation began: sealed with the old key
    try:
        for keys in steps[1:]:
            for which in ("a", "b"):  # one replica at a time: for a while the two hold different lists
                if which == "a":
                    stopped(a)
                    a = replica(*keys)
                else:
                    stopped(b)
                    b = replica(*keys)
                assert both_ways(a, b) == [True] * 4, (which, keys)
                if keys != (NEW,):  # until the old key is retired, what it sealed still opens on both
                    for state, session_id in in_flight:
                        assert honoured(a, state) and honoured(b, state), keys
                        assert serves_session(a, session_id) and serves_session(b, session_id), keys
                in_flight.append((first_round(a), session(b)))
        # Retired: the old key's states and sessions are refused as a forged one is (-32602 saying why; 404).
        for state, session_id in in_flight[:2]:
            assert not honoured(a, state) and not honoured(b, state)
            assert not serves_session(a, session_id) and not serves_session(b, session_id)
    finally:
        stopped(a)
        stopped(b)


def test_promoting_a_key_before_every_replica_holds_it_breaks_what_the_others_made():
    """Why the key is added before it seals: a replica sealing with a key the other lacks is refused there."""
    with replica(OLD) as a, replica(NEW, OLD) as b:
        assert both_ways(a, b) == [True, False, True, False]  # a's reach b; b's are refused by a


def test_one_key_one_list_and_a_file_of_keys_seal_alike(tmp_path):
    keys_file = tmp_path / "state-keys"
    keys_file.write_text(f"# the sealing key first\n{NEW}\n\n  {OLD}  \n")
    single = Sealer(NEW)
    listed = keys_from_environment({"MCPSERVER_STATE_KEYS": f"{NEW}, {OLD}"})
    filed = keys_from_environment({"MCPSERVER_STATE_KEYS_FILE": str(keys_file)})
    assert listed == filed == (NEW, OLD) and keys_from_environment({"MCPSERVER_STATE_KEY": OLD}) == (OLD,)
    binding = ("tools/call", "trip_plan", "digest", "")
    rotated = Sealer([NEW, OLD])
    assert single.open(rotated.seal(binding, {"k": 1}, []), binding) == ({"k": 1}, [])  # the first seals
    assert rotated.open(Sealer(OLD).seal(binding, {"k": 2}, []), binding) == ({"k": 2}, [])  # all open
    assert rotated.open_value("session", Sealer(OLD).seal_value("session", {"r": 1}, 60)) == {"r": 1}
    assert Sealer(NEW).open_value("session", Sealer(OLD).seal_value("session", {"r": 1}, 60)) is None


@pytest.mark.parametrize("environ, says", [
    ({"MCPSERVER_STATE_KEY": "a", "MCPSERVER_STATE_KEYS": "a,b"}, "set one of"),
    ({"MCPSERVER_STATE_KEYS": "a,,b"}, "empty key"),
    ({"MCPSERVER_STATE_KEYS_FILE": "/nonexistent/state-keys"}, "cannot read"),
])
def test_an_ambiguous_or_broken_key_setting_refuses_to_start_saying_why(environ, says):
    with pytest.raises(ConfigError, match=says):
        keys_from_environment(environ)


def test_an_empty_key_file_and_an_empty_key_list_are_refused(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match="holds no key"):
        keys_from_environment({"MCPSERVER_STATE_KEYS_FILE": str(empty)})
    with pytest.raises(ConfigError, match="non-empty string"):
        Sealer([])


def test_a_server_started_with_two_key_settings_says_so_and_exits_1(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "mcpserver", "--check", INTERACTIVE], capture_output=True, text=True,
                          env={**os.environ, "MCPSERVER_STATE_KEY": "a", "MCPSERVER_STATE_KEYS": "a,b"}, timeout=60)
    assert done.returncode == 1 and "set one of MCPSERVER_STATE_KEY and MCPSERVER_STATE_KEYS" in done.stderr, done
