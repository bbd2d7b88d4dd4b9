"""The official SDKs' clients of the legacy era drive the examples: the Python SDK's newest 1.x, the
TypeScript SDK's newest 1.x, and the Python SDK 2.3.0 in legacy mode (mode="legacy": the initialize
handshake, never server/discover). Each runs in its own process (client_tools.drive) and reports
what it saw, and the wire under it, so every test checks an outcome on both: the revision negotiated,
the answer a callback gave reaching the tool, progress in order, a cancelled call that stops.
"""

import json
import os

import pytest
from client_tools import CLIENTS, LEGACY_VERSIONS, NEWEST_LEGACY, ROOT, TRANSPORTS, drive, served

SLOW_TOOLS = os.path.join(ROOT, "tests", "slow_tools.py")


@pytest.fixture(params=CLIENTS)
def client(request):
    return request.param


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


def session(client, transport, example, steps, **plan):
    """Run `steps` against `example`; check the handshake on the wire, and that nothing the revision lacks
    was sent (the SDKs' own models fill some of it in, so only the wire can tell)."""
    with served(example, transport) as connection:
        report = drive(client, connection, steps, **plan)
    asked_for = plan.get("protocol_version", NEWEST_LEGACY)
    first = report["outgoing"][0]
    assert first["method"] == "initialize" and first["params"]["protocolVersion"] == asked_for, first
    assert "server/discover" not in [m.get("method") for m in report["outgoing"]], "not a legacy client after all"
    assert report["protocolVersion"] == asked_for and asked_for in LEGACY_VERSIONS, report["protocolVersion"]
    assert {"jsonrpc": "2.0", "method": "notifications/initialized"} in report["outgoing"]
    for message in report["incoming"]:
        result = message.get("result", {})
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result), ("a modern field in a legacy result", message)
    return report


def outcome(report, index):
    """The result of step `index` (AssertionError with the client's words if the step failed)."""
    step = report["steps"][index]
    assert "error" not in step, (step, report["stderr"][-3000:])
    return step["result"]


def text(report, index):
    result = outcome(report, index)
    assert not result.get("isError"), result
    return result["content"][0]["text"]


def wire_progress(report, token):
    return [m["params"] for m in report["incoming"]
            if m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token]


def token_of(report, tool, occurrence=0):
    calls = [m for m in report["outgoing"] if m.get("method") == "tools/call" and m["params"]["name"] == tool]
    return calls[occurrence]["params"]["_meta"]["progressToken"], calls[occurrence]["id"]


def assert_progress(client, report, index, tool, total, occurrence=0):
    """Progress on the wire: 1..total in order, each before the response; what the client's callback got:
    strictly increasing, and the wire's values from the first on."""
    token, request_id = token_of(report, tool, occurrence)
    sent = wire_progress(report, token)
    assert [p["progress"] for p in sent] == list(range(1, total + 1)) and all(p["total"] == total for p in sent), sent
    position = next(i for i, m in enumerate(report["incoming"]) if m.get("id") == request_id and "method" not in m)
    last = max(i for i, m in enumerate(report["incoming"]) if m.get("method") == "notifications/progress"
               and m["params"]["progressToken"] == token)
    assert last < position, "a progress notification came after the call's response"
    seen = [p[0] for p in report["steps"][index]["progress"]]
    assert seen == sorted(set(seen)), f"progress not strictly increasing: {seen}"
    if client == "typescript-sdk-1":
        # The TypeScript SDK runs notification handlers a microtask late but responses at once: when the
        # last notifications and the response arrive in one read, it drops those notifications (its
        # Protocol._onnotification). The wire above has them all; the callback sees a prefix.
        assert seen == list(range(1, len(seen) + 1)) and seen, seen
    else:
        assert seen == list(range(1, total + 1)), seen


# -- demo.py: list and call ---------------------------------------------------------------------------------

def test_the_demo_lists_and_calls(client, transport):
    report = session(client, transport, "demo.py", [
        {"op": "list_tools"},
        {"op": "call", "name": "echo", "arguments": {"text": "héllo wörld"}},
        {"op": "call", "name": "add", "arguments": {"a": 2, "b": 3}},
        {"op": "call", "name": "big", "arguments": {"size": 200_000}},
        {"op": "call", "name": "no_such_tool", "arguments": {}},
        {"op": "ping"},
    ])
    assert report["serverInfo"]["name"] == "demo" and "echo text" in report["instructions"]
    assert [tool["name"] for tool in outcome(report, 0)["tools"]] == ["echo", "add", "big"]
    assert text(report, 1) == "héllo wörld"
    assert outcome(report, 2)["structuredContent"] == {"sum": 5}  # the SDKs check it against the outputSchema
    assert text(report, 3) == "x" * 200_000
    assert report["steps"][4]["error"]["code"] == -32602 and "no_such_tool" in report["steps"][4]["error"]["message"]
    assert outcome(report, 5) == {}


@pytest.mark.parametrize("revision", LEGACY_VERSIONS)
def test_each_legacy_revision_is_served_as_asked(revision):
    """The Python SDK 1.x knows all four revisions; asked for an older one, it gets that one, shaped for it."""
    report = session("python-sdk-1", "stdio", "long_running.py", [
        {"op": "list_tools"},
        {"op": "call", "name": "count", "arguments": {"to": 3, "delay": 0}, "progress": True},
    ], protocol_version=revision)
    assert text(report, 1) == "counted to 3"
    token, _ = token_of(report, "count")
    messages = [p.get("message") for p in wire_progress(report, token)]
    # A progress message came with 2025-03-26; annotations on tools too.
    assert messages == ([None] * 3 if revision == "2024-11-05" else ["counted to 1", "counted to 2", "counted to 3"])
    assert ("annotations" in outcome(report, 0)["tools"][0]) == (revision != "2024-11-05")


# -- interactive.py: elicitation, sampling and roots as real requests to the client --------------------------

ANSWERS = {
    "elicit": [["Really delete /tmp/kept.txt", "decline", None],
               ["Really delete", "accept", {"confirm": True}],
               ["Where to?", "accept", {"city": "Kyoto"}],
               ["How many days", "accept", {"days": 5}],
               ["Your name?", "accept", {"name": "Ada"}],
               ["Which language", "accept", {"language": "Python"}],
               ["passphrase", "accept", {"passphrase": "open sesame"}]],
    "sample": "old pond / a frog jumps in / the sound of water",
    "roots": [{"uri": "file:///tmp", "name": "tmp"}, {"uri": "file:///no/such/root-for-mcpserver", "name": "gone"}],
}


def test_elicitation_sampling_and_roots_round_trips(client, transport):
    report = session(client, transport, "interactive.py", [
        {"op": "call", "name": "delete_file", "arguments": {"path": "/tmp/gone.txt"}},
        {"op": "call", "name": "delete_file", "arguments": {"path": "/tmp/kept.txt"}},
        {"op": "call", "name": "haiku", "arguments": {"topic": "frogs"}},
        {"op": "call", "name": "where_am_i"},
        {"op": "call", "name": "trip_plan"},
        {"op": "call", "name": "profile"},
        {"op": "get_prompt", "name": "review"},
        {"op": "read", "uri": "secrets://vault"},
    ], answers=ANSWERS)
    # Each answer reached the tool: accept deletes, decline keeps.
    assert text(report, 0) == "Deleted /tmp/gone.txt."
    assert text(report, 1) == "Kept /tmp/kept.txt."
    assert text(report, 2) == ANSWERS["sample"]
    assert outcome(report, 3)["structuredContent"] == {"roots": ["file:///tmp", "file:///no/such/root-for-mcpserver"],
                                                        "here": ["/tmp"]}
    assert text(report, 4) == "5 days in Kyoto: book the train, pack light."
    assert text(report, 5) == "Ada works in 2 root(s)."
    assert outcome(report, 6)["messages"][0]["content"]["text"] == "Review this Python code for bugs, then for style."
    assert outcome(report, 7)["contents"][0]["text"] == "The treasure is under the old oak."
    # What the server asked, in order, as each client's callbacks saw it.
    asked = [(a["method"], a.get("params", {}).get("message")) for a in report["asked"]]
    assert asked == [("elicitation/create", "Really delete /tmp/gone.txt?"),
                     ("elicitation/create", "Really delete /tmp/kept.txt?"),
                     ("sampling/createMessage", None), ("roots/list", None),
                     ("elicitation/create", "Where to?"), ("elicitation/create", "How many days in Kyoto?"),
                     ("elicitation/create", "Your name?"), ("roots/list", None),
                     ("elicitation/create", "Which language is the code in?"),
                     ("elicitation/create", "The vault's passphrase?")]
    sampling = report["asked"][2]["params"]
    assert sampling["maxTokens"] == 60 and sampling["systemPrompt"].startswith("You write haiku")
    assert sampling["messages"] == [{"role": "user", "content": {"type": "text", "text": "Write a haiku about frogs."}}]
    # Every request the server sent got exactly one answer, and each was sent while a call was open.
    asks = [m["id"] for m in report["incoming"] if "method" in m and "id" in m]
    answers = [m["id"] for m in report["outgoing"] if "method" not in m and "id" in m]
    assert sorted(asks, key=str) == sorted(answers, key=str) and len(set(asks)) == len(asks) == len(asked)


def test_a_client_without_those_capabilities_gets_a_readable_refusal(client, transport):
    """No callbacks, so no elicitation, sampling or roots declared: the tools say so; nothing hangs."""
    report = session(client, transport, "interactive.py", [
        {"op": "call", "name": "delete_file", "arguments": {"path": "/tmp/gone.txt"}},
        {"op": "call", "name": "haiku", "arguments": {"topic": "frogs"}},
        {"op": "call", "name": "where_am_i"},
        {"op": "call", "name": "profile"},
    ], callbacks=[])
    for index, needed in ((0, "elicitation"), (1, "sampling")):
        result = outcome(report, index)
        assert result["isError"] and needed in result["content"][0]["text"], result
    assert outcome(report, 2)["structuredContent"] == {"roots": [], "here": []}  # ctx.roots(default=[])
    assert outcome(report, 3)["isError"] and "roots" in outcome(report, 3)["content"][0]["text"]
    assert not [m for m in report["incoming"] if "method" in m and "id" in m], "the server asked anyway"


# -- long_running.py: progress and cancel ----------------------------------------------------------------

def test_progress_arrives_in_order(client, transport):
    report = session(client, transport, "long_running.py", [
        {"op": "call", "name": "count", "arguments": {"to": 20, "delay": 0.01}, "progress": True},
        {"op": "call", "name": "countdown", "arguments": {"seconds": 4}, "progress": True},
    ])
    assert text(report, 0) == "counted to 20"
    assert_progress(client, report, 0, "count", 20)
    token, _ = token_of(report, "count")
    assert [p["message"] for p in wire_progress(report, token)] == [f"counted to {n}" for n in range(1, 21)]
    assert text(report, 1).strip() == "liftoff after 4"  # a command tool: its "i/n" stderr lines are the progress
    assert_progress(client, report, 1, "countdown", 4)


def assert_cancelled(report, index, tool):
    """The client sent notifications/cancelled for the call; no response to it ever came; after what was
    already under way when the server read the cancel, nothing more for it arrived either."""
    step = report["steps"][index]
    request = step["request"]
    assert request["params"]["name"] == tool
    cancels = [m for m in report["outgoing"] if m.get("method") == "notifications/cancelled"
               and m["params"]["requestId"] == request["id"]]
    assert len(cancels) == 1, report["outgoing"]
    assert "result" not in step["outcome"], step["outcome"]
    # mcp 2.3.0's HTTP transport reports a stream that ended with no response (what the server does for a
    # cancelled call) as an error of its own making, -32000: the client's reading, not a server message.
    answers = [m for m in report["incoming"] if m.get("id") == request["id"] and "method" not in m
               and m.get("error", {}).get("message") != "SSE stream ended without a response"]
    assert not answers, "a response came for the cancelled call"
    token = request["params"]["_meta"]["progressToken"]
    later = [m for m in report["incoming"][step["settled_at"]:]
             if m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token]
    assert not later, f"the cancelled call kept reporting progress: {later}"
    return [p["progress"] for p in wire_progress(report, token)]


def test_a_cancelled_call_stops(client, transport):
    report = session(client, transport, "long_running.py", [
        {"op": "cancel", "name": "count", "arguments": {"to": 1000, "delay": 0.05}, "after": 3},
        {"op": "call", "name": "count", "arguments": {"to": 2, "delay": 0}},
        {"op": "cancel", "name": "countdown", "arguments": {"seconds": 300}, "after": 2},
        {"op": "call", "name": "countdown", "arguments": {"seconds": 1}},
    ])
    counted = assert_cancelled(report, 0, "count")
    assert 3 <= len(counted) < 1000 and counted == list(range(1, len(counted) + 1))
    assert text(report, 1) == "counted to 2"  # the session still serves
    counted = assert_cancelled(report, 2, "countdown")
    assert 2 <= len(counted) < 300
    # The command's own output stops too: its shell loop is gone, not only the progress it fed.
    lines = [m for m in report["incoming"][report["steps"][2]["settled_at"]:]
             if m.get("method") == "notifications/message" and m["params"].get("logger") == "countdown"
             and str(m["params"].get("data", "")).endswith("/300")]
    assert not lines, lines
    assert text(report, 3).strip() == "liftoff after 1"


def test_a_cancelled_call_stops_its_side_effect(client, transport, tmp_path):
    """A tool that appends a line to a file every 10 ms, then reports it as progress: once cancelled, the
    file stops growing (the driver watches 1.5 s more, in which a running ticker would add ~150 lines)."""
    path = str(tmp_path / "ticks")
    report = session(client, transport, SLOW_TOOLS, [
        {"op": "cancel", "name": "ticker", "arguments": {"seconds": 60, "path": path}, "after": 5},
        {"op": "call", "name": "pid"},
    ])
    reported = assert_cancelled(report, 0, "ticker")
    with open(path) as file:
        ticks = file.read().count("tick")
    # Every line but the one being written when the cancel landed was reported before it.
    assert 5 <= len(reported) <= ticks <= len(reported) + 1, (ticks, len(reported))
    assert text(report, 1).isdigit()


# -- everything.py: every kind of content, logging, resources, prompts, completion ------------------------

def test_everything(client, transport):
    answers = {"elicit": [["Who are you", "accept", {"username": "ada", "email": "ada@example.org"}],
                          ["defaults", "accept", {"name": "Ada", "age": 36, "score": 99.5, "status": "pending",
                                                  "verified": False}],
                          ["enum", "decline", None]],
               "sample": "Paris", "roots": [{"uri": "file:///tmp", "name": "tmp"}]}
    report = session(client, transport, "everything.py", [
        {"op": "set_level", "level": "debug"},                                                          # 0
        {"op": "call", "name": "test_simple_text"},                                                     # 1
        {"op": "call", "name": "test_image_content"},                                                   # 2
        {"op": "call", "name": "test_audio_content"},                                                   # 3
        {"op": "call", "name": "test_embedded_resource"},                                               # 4
        {"op": "call", "name": "test_multiple_content_types"},                                          # 5
        {"op": "call", "name": "test_error_handling"},                                                  # 6
        {"op": "call", "name": "test_tool_with_logging"},                                               # 7
        {"op": "call", "name": "test_tool_with_progress", "progress": True},                            # 8
        {"op": "call", "name": "test_sampling", "arguments": {"prompt": "Capital of France?"}},         # 9
        {"op": "call", "name": "test_elicitation", "arguments": {"message": "Who are you?"}},           # 10
        {"op": "call", "name": "test_elicitation_sep1034_defaults"},                                    # 11
        {"op": "call", "name": "test_elicitation_sep1330_enums"},                                       # 12
        {"op": "read", "uri": "test://static-text"},                                                    # 13
        {"op": "read", "uri": "test://static-binary"},                                                  # 14
        {"op": "read", "uri": "test://template/42/data"},                                               # 15
        {"op": "list_templates"},                                                                       # 16
        {"op": "get_prompt", "name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},  # 17
        {"op": "get_prompt", "name": "test_prompt_with_image"},                                         # 18
        {"op": "complete", "prompt": "test_prompt_with_arguments", "argument": {"name": "arg1", "value": "pa"}},  # 19
        {"op": "list_tools"},                                                                           # 20
        {"op": "read", "uri": "test://no-such-resource"},                                               # 21
    ], answers=answers)
    assert outcome(report, 0) == {}
    assert text(report, 1) == "This is a simple text response for testing."
    assert [(b["type"], b["mimeType"]) for b in outcome(report, 2)["content"]] == [("image", "image/png")]
    assert [(b["type"], b["mimeType"]) for b in outcome(report, 3)["content"]] == [("audio", "audio/wav")]
    assert outcome(report, 4)["content"][0]["resource"]["text"] == "This is an embedded resource content."
    assert [b["type"] for b in outcome(report, 5)["content"]] == ["text", "image", "resource"]
    failed = outcome(report, 6)
    assert failed["isError"] and "intentionally returns an error" in failed["content"][0]["text"]
    assert [log["data"] for log in report["logs"] if log.get("logger") == "test_tool_with_logging"] == [
        "Tool execution started", "Tool processing data", "Tool execution completed"]
    token, _ = token_of(report, "test_tool_with_progress")
    assert [p["progress"] for p in wire_progress(report, token)] == [0, 50, 100]
    seen = [p[0] for p in report["steps"][8]["progress"]]
    assert seen == [0, 50, 100][:len(seen)] and len(seen) >= (2 if client == "typescript-sdk-1" else 3), seen
    assert text(report, 9) == "LLM response: Paris"
    assert text(report, 10) == ('User response: action=accept, content={"username": "ada", '
                                '"email": "ada@example.org"}')
    assert '"status": "pending"' in text(report, 11)
    # The defaults reached the client's form as SEP-1034 says (2025-11-25 keeps them all).
    defaults = next(a for a in report["asked"] if "defaults" in a.get("params", {}).get("message", ""))
    assert {k: v.get("default") for k, v in defaults["params"]["requestedSchema"]["properties"].items()} == {
        "name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": True}
    assert text(report, 12) == "Elicitation completed: action=decline, content={}"
    assert outcome(report, 13)["contents"][0]["text"] == "This is the content of the static text resource."
    assert outcome(report, 14)["contents"][0]["blob"].startswith("iVBORw0KGgo")
    assert outcome(report, 15)["contents"][0]["text"] == '{"id":"42","templateTest":true,"data":"Data for ID: 42"}'
    assert outcome(report, 16)["resourceTemplates"][0]["uriTemplate"] == "test://template/{id}/data"
    assert outcome(report, 17)["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='a', arg2='b'"
    assert outcome(report, 18)["messages"][0]["content"]["type"] == "image"
    assert outcome(report, 19)["completion"]["values"] == ["paris", "park", "party", "pasta"]
    assert "json_schema_2020_12_tool" in [tool["name"] for tool in outcome(report, 20)["tools"]]
    missing = report["steps"][21]["error"]
    assert missing["code"] in (-32002, -32602), missing  # legacy "resource not found" (LEGACY.md §11)


@pytest.mark.parametrize("revision", ["2025-03-26", "2024-11-05"])
def test_an_older_session_is_never_sent_elicitation(revision):
    """The Python SDK 1.x declares elicitation whatever revision it asks for; elicitation came with
    2025-06-18, so an older session does not have it: the tool says so, and no elicitation/create (a
    request that revision lacks) goes out. Sampling and roots are older, and still round-trip."""
    report = session("python-sdk-1", "stdio", "interactive.py", [
        {"op": "call", "name": "delete_file", "arguments": {"path": "/tmp/gone.txt"}},
        {"op": "call", "name": "haiku", "arguments": {"topic": "frogs"}},
        {"op": "call", "name": "where_am_i"},
    ], answers=ANSWERS, protocol_version=revision)
    assert "elicitation" in report["outgoing"][0]["params"]["capabilities"]  # what makes this a real case
    refused = outcome(report, 0)
    assert refused["isError"] and "elicitation" in refused["content"][0]["text"], refused
    assert "elicitation/create" not in [m.get("method") for m in report["incoming"]]
    assert text(report, 1) == ANSWERS["sample"]
    where = json.loads(outcome(report, 2)["content"][0]["text"])  # no structuredContent before 2025-06-18
    assert where == {"roots": [root["uri"] for root in ANSWERS["roots"]], "here": ["/tmp"]}
