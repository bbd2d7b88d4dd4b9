"""Input from the client mid-call (MRTR): rounds, answers, and a requestState no client can forge."""

import base64
import json
import os
import time

import pytest
from mcpserver import Context, Server, inputs
from mcpserver.testing import Client, ClientError
from mcptest import EXAMPLES, META, StdioServer, answer

INTERACTIVE = os.path.join(EXAMPLES, "interactive.py")
EVERYTHING = {"elicitation": {}, "sampling": {}, "roots": {}}


def message(method, capabilities=None, **params):
    meta = dict(META, **{"io.modelcontextprotocol/clientCapabilities": EVERYTHING if capabilities is None
                         else capabilities})
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta, **params}}


def tool_call(name, arguments=None, capabilities=None, **extra):
    return message("tools/call", capabilities, name=name, arguments=arguments or {}, **extra)


def accept(**content):
    return {"action": "accept", "content": content}


@pytest.fixture
def recorded():
    """A server whose tool records each time it gets past its question: proof the tool ran, or did not."""
    server = Server("recorded", state_key="test-key")
    runs = []

    @server.tool()
    def transfer(amount: int, ctx: Context) -> str:
        """Move money, once the user confirms."""
        answer = ctx.elicit(f"Transfer {amount}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                            key="confirm")
        runs.append((amount, answer))
        return f"transferred {amount}" if answer["content"].get("ok") else "kept"

    @server.tool()
    def other(amount: int, ctx: Context) -> str:
        ctx.elicit("Other?", key="confirm")
        runs.append(("other", amount))
        return "other"

    return server, runs


def test_a_round_asks_and_the_retry_with_answers_completes(recorded):
    server, runs = recorded
    first = answer(tool_call("transfer", {"amount": 5}), server)["result"]
    assert first["resultType"] == "input_required" and runs == []
    assert first["inputRequests"] == {"confirm": inputs.elicit("Transfer 5?", {
        "type": "object", "properties": {"ok": {"type": "boolean"}}})}
    assert "ttlMs" not in first and "cacheScope" not in first
    second = answer(tool_call("transfer", {"amount": 5}, inputResponses={"confirm": accept(ok=True)},
                              requestState=first["requestState"]), server)["result"]
    assert second["resultType"] == "complete" and second["content"][0]["text"] == "transferred 5"
    assert runs == [(5, accept(ok=True))]


def flipped(state: str, index: int) -> str:
    character = "A" if state[index] != "A" else "B"
    return state[:index] + character + state[index + 1:]


def test_a_tampered_foreign_or_expired_state_is_refused_and_the_tool_never_runs(recorded):
    server, runs = recorded
    state = answer(tool_call("transfer", {"amount": 5}), server)["result"]["requestState"]
    answers = {"confirm": accept(ok=True)}
    version, payload, mac = state.split(".")
    forged_payload = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged_payload["r"] = {"confirm": accept(ok=True)}
    forged = ".".join([version, base64.urlsafe_b64encode(json.dumps(forged_payload).encode()).decode().rstrip("="),
                       mac])
    attempts = {
        "one byte of the payload": tool_call("transfer", {"amount": 5}, inputResponses=answers,
                                             requestState=flipped(state, len(version) + 5)),
        "one byte of the seal": tool_call("transfer", {"amount": 5}, inputResponses=answers,
                                          requestState=flipped(state, len(state) - 3)),
        "a payload rewritten": tool_call("transfer", {"amount": 5}, inputResponses=answers, requestState=forged),
        "other arguments": tool_call("transfer", {"amount": 5000}, inputResponses=answers, requestState=state),
        "another tool": tool_call("other", {"amount": 5}, inputResponses=answers, requestState=state),
        "not a state at all": tool_call("transfer", {"amount": 5}, inputResponses=answers, requestState=42),
    }
    for what, attempt in attempts.items():
        error = answer(attempt, server)["error"]
        assert error["code"] == -32602 and "requestState was refused" in error["message"], what
    other_key = Server("other", state_key="another-key")
    other_key.add_tool(server.tools["transfer"])
    error = answer(tool_call("transfer", {"amount": 5}, inputResponses=answers, requestState=state), other_key)
    assert "sealed with another key" in error["error"]["message"]
    quick = Server("quick", state_key="test-key", state_ttl=0.05)
    quick.add_tool(server.tools["transfer"])
    stale = answer(tool_call("transfer", {"amount": 5}), quick)["result"]["requestState"]
    time.sleep(1.1)
    error = answer(tool_call("transfer", {"amount": 5}, inputResponses=answers, requestState=stale), quick)["error"]
    assert "expired" in error["message"]
    assert runs == [], "a refused state reached the tool"


def test_replicas_with_one_key_accept_each_others_state(recorded):
    server, runs = recorded
    replica = Server("replica", state_key="test-key")
    replica.add_tool(server.tools["transfer"])
    state = answer(tool_call("transfer", {"amount": 7}), server)["result"]["requestState"]
    done = answer(tool_call("transfer", {"amount": 7}, inputResponses={"confirm": accept(ok=False)},
                            requestState=state), replica)["result"]
    assert done["content"][0]["text"] == "kept"
    assert runs == [(7, accept(ok=False))]


def test_missing_extra_and_malformed_answers(recorded):
    server, runs = recorded
    state = answer(tool_call("transfer", {"amount": 1}), server)["result"]["requestState"]
    again = answer(tool_call("transfer", {"amount": 1}, inputResponses={"wrong": accept()}, requestState=state),
                   server)["result"]
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["confirm"]
    done = answer(tool_call("transfer", {"amount": 1}, inputResponses={"confirm": accept(ok=True), "extra": 5},
                            requestState=state), server)["result"]
    assert done["content"][0]["text"] == "transferred 1"
    for bad in ([1, 2], "answers", {"confirm": "yes"}, {"confirm": {"content": {}}}):
        error = answer(tool_call("transfer", {"amount": 1}, inputResponses=bad, requestState=state), server)
        assert error["error"]["code"] == -32602, bad
    assert runs == [(1, accept(ok=True))]  # only the well-answered round got past the question


def test_a_client_without_the_capability_gets_32021_or_the_tools_default():
    with Client(INTERACTIVE) as client:  # declares nothing: it was given nothing to answer with
        with pytest.raises(ClientError) as refused:
            client.call_tool("delete_file", {"path": "/tmp/x"})
        assert refused.value.code == -32021 and refused.value.data["requiredCapabilities"] == {"elicitation": {}}
        assert client.call_tool("where_am_i").structured == {"roots": [], "here": []}


def test_several_questions_in_one_round_and_several_rounds_over_stdio():
    with StdioServer(INTERACTIVE) as server:
        first = server.ask(tool_call("profile"))["result"]
        assert sorted(first["inputRequests"]) == ["name", "roots"]
        done = server.ask(tool_call("profile", inputResponses={
            "name": accept(name="Ada"), "roots": {"roots": [{"uri": "file:///tmp"}]}},
            requestState=first["requestState"]))["result"]
        assert done["content"][0]["text"] == "Ada works in 1 root(s)."
        rounds = [server.ask(tool_call("trip_plan"))["result"]]
        rounds.append(server.ask(tool_call("trip_plan", inputResponses={"where": accept(city="Oslo")},
                                           requestState=rounds[-1]["requestState"]))["result"])
        assert list(rounds[-1]["inputRequests"]) == ["days"]
        assert rounds[-1]["inputRequests"]["days"]["params"]["message"] == "How many days in Oslo?"
        rounds.append(server.ask(tool_call("trip_plan", inputResponses={"days": accept(days=2)},
                                           requestState=rounds[-1]["requestState"]))["result"])
        assert rounds[-1]["content"][0]["text"] == "2 days in Oslo: book the train, pack light."


def test_prompts_and_resources_ask_too():
    with StdioServer(INTERACTIVE) as server:
        first = server.ask(message("prompts/get", name="review"))["result"]
        assert first["resultType"] == "input_required"
        done = server.ask(message("prompts/get", name="review", inputResponses={"input-1": accept(language="Go")},
                                  requestState=first["requestState"]))["result"]
        assert done["messages"][0]["content"]["text"].startswith("Review this Go code")
        first = server.ask(message("resources/read", uri="secrets://vault"))["result"]
        assert first["resultType"] == "input_required" and "ttlMs" not in first
        done = server.ask(message("resources/read", uri="secrets://vault",
                                  inputResponses={"input-1": accept(passphrase="open sesame")},
                                  requestState=first["requestState"]))["result"]
        assert done["contents"][0]["text"] == "The treasure is under the old oak." and done["ttlMs"] >= 0


def test_input_required_is_never_the_answer_to_other_methods():
    with StdioServer(INTERACTIVE) as server:
        for method in ("tools/list", "prompts/list", "resources/list", "server/discover"):
            answer = server.ask(message(method, inputResponses={"x": accept()}, requestState="v1.x.y"))
            assert answer["result"]["resultType"] == "complete", method


def test_a_command_tool_can_ask_for_confirmation_before_it_runs(tmp_path):
    manifest = tmp_path / "confirm.json"
    marker = tmp_path / "ran"
    manifest.write_text(json.dumps({"name": "c", "tools": [{
        "name": "touch", "command": ["touch", str(marker)], "stdin": "none", "confirm": "Touch it for {reason}?",
        "inputSchema": {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}}]}))
    with StdioServer(str(manifest)) as server:
        first = server.ask(tool_call("touch", {"reason": "a test"}))["result"]
        assert first["inputRequests"]["confirm"]["params"]["message"] == "Touch it for a test?"
        assert not marker.exists()
        declined = server.ask(tool_call("touch", {"reason": "a test"}, requestState=first["requestState"],
                                        inputResponses={"confirm": {"action": "decline"}}))["result"]
        assert declined["isError"] is True and not marker.exists()
        accepted = server.ask(tool_call("touch", {"reason": "a test"}, inputResponses={"confirm": {"action": "accept"}},
                                        requestState=first["requestState"]))["result"]
        assert accepted.get("isError") is not True and marker.exists()
        assert server.ask(tool_call("touch", {"reason": "x"}, capabilities={}))["error"]["code"] == -32021


def test_a_key_of_this_process_only_is_said_once_and_a_shared_key_says_nothing(monkeypatch, caplog):
    from mcpserver._state import Sealer

    monkeypatch.delenv("MCPSERVER_STATE_KEY", raising=False)
    binding = ("tools/call", "book", "digest", "")
    with caplog.at_level("WARNING", logger="mcpserver.state"):
        own = Sealer()
        own.open(own.seal(binding, {}, ["where"]), binding)
        own.seal(binding, {}, ["where"])
    warnings = [r.getMessage() for r in caplog.records if r.name == "mcpserver.state"]
    assert len(warnings) == 1 and "MCPSERVER_STATE_KEY" in warnings[0] and "another process" in warnings[0]
    caplog.clear()
    monkeypatch.setenv("MCPSERVER_STATE_KEY", "shared")
    with caplog.at_level("WARNING", logger="mcpserver.state"):
        shared = Sealer()
        shared.seal(binding, {}, ["where"])
    assert [r for r in caplog.records if r.name == "mcpserver.state"] == []
    assert Sealer().open(shared.seal(binding, {"k": 1}, []), binding) == ({"k": 1}, [])  # replicas share it
