"""The legacy era (LEGACY.md): every message a session of each initialize-based revision gets from the
examples validates against that revision's official schema, and carries nothing the revision lacks
(the schemas let results carry extra keys, so that is checked field by field). Over real pipes."""

import json
import os

import pytest
from mcptest import DEMO, EXAMPLES, MOVIES, ROOT, StdioServer, call
from official_schemas import LEGACY_REVISIONS, conforms, errors

REVISIONS = LEGACY_REVISIONS
EVERYTHING = os.path.join(EXAMPLES, "everything.py")
INTERACTIVE = os.path.join(EXAMPLES, "interactive.py")
DICE = os.path.join(EXAMPLES, "dice.py")

RESULT_OF = {"initialize": "InitializeResult", "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
             "resources/list": "ListResourcesResult", "resources/templates/list": "ListResourceTemplatesResult",
             "resources/read": "ReadResourceResult", "prompts/list": "ListPromptsResult",
             "prompts/get": "GetPromptResult", "completion/complete": "CompleteResult", "ping": "EmptyResult",
             "logging/setLevel": "EmptyResult", "resources/subscribe": "EmptyResult",
             "resources/unsubscribe": "EmptyResult"}
SERVER_MESSAGE_OF = {"notifications/progress": "ProgressNotification",
                     "notifications/message": "LoggingMessageNotification",
                     "notifications/cancelled": "CancelledNotification",
                     "notifications/resources/updated": "ResourceUpdatedNotification",
                     "notifications/tools/list_changed": "ToolListChangedNotification",
                     "notifications/prompts/list_changed": "PromptListChangedNotification",
                     "elicitation/create": "ElicitRequest", "sampling/createMessage": "CreateMessageRequest",
                     "roots/list": "ListRootsRequest"}


class Session:
    """A legacy client on real pipes: every message the server sends is checked, and the server's own
    requests are answered from `answers` (method -> result)."""

    def __init__(self, server, revision, capabilities=None, answers=None):
        self.server, self.revision, self.answers = server, revision, answers or {}
        self.next_id = 0
        self.notifications = []
        result = self.ask("initialize", protocolVersion=revision, capabilities=capabilities or {},
                          clientInfo={"name": "legacy-test", "version": "1"})
        assert result["protocolVersion"] == revision
        self.send_line({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send_line(self, message):
        self.server.send(json.dumps(message).encode() + b"\n")

    def ask(self, method, **params):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params:
            message["params"] = params
        self.server.send(json.dumps(message).encode() + b"\n")
        while True:
            incoming = self.server.receive(30)
            assert not errors(self.revision, incoming, "JSONRPCMessage"), incoming
            if incoming.get("id") == self.next_id and "method" not in incoming:
                break
            self.from_server(incoming)
        if "error" in incoming:
            conforms(self.revision, incoming, "JSONRPCError" if self.revision < "2025-11-25"
                     else "JSONRPCErrorResponse")
            return incoming["error"]
        conforms(self.revision, incoming["result"], RESULT_OF[method])
        return incoming["result"]

    def from_server(self, incoming):
        method = incoming["method"]
        conforms(self.revision, incoming, SERVER_MESSAGE_OF[method])
        if "id" in incoming:  # the server asks: answer as a client of this revision would
            self.send_line({"jsonrpc": "2.0", "id": incoming["id"], "result": self.answers[method]})
        else:
            self.notifications.append(incoming)


def every_method(session):
    tools = session.ask("tools/list")["tools"]
    for tool in tools:
        if tool["name"].startswith("test_input_required") or tool["name"] in ("test_header_params",):
            continue
        session.ask("tools/call", name=tool["name"], arguments={})
    return tools


@pytest.mark.parametrize("revision", REVISIONS)
def test_everything_conforms_to_each_revision(revision):
    with StdioServer(EVERYTHING) as server:
        session = Session(server, revision, {"sampling": {}, "roots": {}, "elicitation": {}}
                          if revision >= "2025-06-18" else {"sampling": {}, "roots": {}},
                          answers={"sampling/createMessage": {"role": "assistant", "model": "m",
                                                              "content": {"type": "text", "text": "ok"}},
                                   "elicitation/create": {"action": "accept", "content": {"confirm": True}},
                                   "roots/list": {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}})
        assert session.ask("ping") == {}
        assert session.ask("logging/setLevel", level="debug") == {}
        every_method(session)
        session.ask("tools/call", name="test_tool_with_progress", arguments={}, _meta={"progressToken": "p"})
        for method in ("resources/list", "resources/templates/list", "prompts/list"):
            session.ask(method)
        session.ask("resources/read", uri="test://static-text")
        session.ask("resources/read", uri="test://template/7/data")
        skill_files = [r["uri"] for r in session.ask("resources/list")["resources"] if r["uri"].startswith("skill://")]
        assert "skill://tool-review/SKILL.md" in skill_files  # skills are plain resources to a legacy client
        for uri in skill_files:
            session.ask("resources/read", uri=uri)
        session.ask("prompts/get", name="test_prompt_with_image")
        session.ask("prompts/get", name="test_prompt_with_embedded_resource", arguments={"resourceUri": "test://x"})
        session.ask("completion/complete", ref={"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                    argument={"name": "arg1", "value": "pa"})
        assert session.ask("resources/subscribe", uri="test://static-text") == {}
        assert session.ask("resources/unsubscribe", uri="test://static-text") == {}
        missing = session.ask("resources/read", uri="test://nothing-here")
        assert missing["code"] == -32002 and missing["data"] == {"uri": "test://nothing-here"}
        assert {n["method"] for n in session.notifications} >= {"notifications/progress", "notifications/message"}


@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("target", [DEMO, MOVIES, DICE], ids=["demo", "movies", "dice"])
def test_the_other_examples_conform_to_each_revision(revision, target):
    with StdioServer(target) as server:
        session = Session(server, revision)
        session.ask("tools/list")
        if target == DICE:  # an app: its _meta only where the revision has _meta, and no extension
            session.ask("resources/list")
            session.ask("resources/read", uri="ui://dice/roller")
            session.ask("tools/call", name="roll_dice", arguments={"count": 3})
        elif target == DEMO:
            session.ask("tools/call", name="add", arguments={"a": 1, "b": 2})  # structured content
            session.ask("tools/call", name="echo", arguments={"text": 5})  # an isError result
        else:
            session.ask("tools/call", name="search_movies", arguments={"genre": "drama"})
            session.ask("resources/read", uri="movies://catalogue")
            session.ask("prompts/get", name="recommend", arguments={"mood": "sleepy"})


EVERY_FIELD = os.path.join(ROOT, "tests", "every_field.py")
FIXTURE_ANSWERS = {"sampling/createMessage": {"role": "assistant", "model": "m",
                                              "content": {"type": "text", "text": "ok"}},
                   "elicitation/create": {"action": "accept", "content": {"name": "Ada"}}}


def every_field(session):
    """Everything tests/every_field.py offers, asked of it (tests/unit/test_revision_schemas.py asks the same
    in process, of every example, in every revision)."""
    for tool in session.ask("tools/list")["tools"]:
        arguments = {"x": 1, "y": 2} if tool["name"] == "point" else {}
        session.ask("tools/call", name=tool["name"], arguments=arguments, _meta={"progressToken": tool["name"]})
    for resource in session.ask("resources/list")["resources"]:
        session.ask("resources/read", uri=resource["uri"])
    session.ask("resources/templates/list")
    session.ask("resources/read", uri="every://items/apple")
    session.ask("prompts/list")
    session.ask("prompts/get", name="every_message", arguments={"topic": "space"})
    assert {n["method"] for n in session.notifications} >= {"notifications/progress", "notifications/message"}


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_optional_field_is_shaped_for_each_revision_over_real_pipes(revision):
    with StdioServer(EVERY_FIELD) as server:
        capabilities = {"sampling": {}, "elicitation": {}} if revision >= "2025-06-18" else {"sampling": {}}
        session = Session(server, revision, capabilities, answers=FIXTURE_ANSWERS)
        session.ask("logging/setLevel", level="debug")
        every_field(session)


def test_an_unknown_revision_gets_the_newest_legacy_one_and_a_modern_request_is_still_served():
    with StdioServer(DEMO) as server:
        server.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})
            .encode() + b"\n")
        assert server.receive()["result"]["protocolVersion"] == "2025-11-25"
        modern = server.ask(call("echo", id=2, text="still modern"))
        assert modern["result"]["resultType"] == "complete"  # a request with _meta is 2026-07-28's


def test_a_2024_session_is_never_sent_elicitation_even_if_its_client_declares_it():
    """2024-11-05 has no elicitation/create: the tool gets the missing-capability answer instead."""
    with StdioServer(EVERYTHING) as server:
        session = Session(server, "2024-11-05", {"elicitation": {}})
        result = session.ask("tools/call", name="test_elicitation", arguments={"message": "hi"})
        assert result["isError"] is True and "elicitation" in result["content"][0]["text"]


class HttpSession(Session):
    """The same client over Streamable HTTP: a session id from initialize, a POST per message, SSE answers
    read frame by frame, the server's requests answered by POSTs of their own."""

    def __init__(self, server, revision, capabilities=None, answers=None):
        self.session_id = None
        super().__init__(server, revision, capabilities, answers)

    def headers(self):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session_id is not None:
            headers.update({"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": self.revision})
        return headers

    def post(self, message):
        connection = self.server.connection()
        connection.request("POST", "/mcp", body=json.dumps(message).encode(), headers=self.headers())
        response = connection.getresponse()
        self.session_id = self.session_id or response.getheader("Mcp-Session-Id")
        return connection, response

    def ask(self, method, **params):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params else {})}
        connection, response = self.post(message)
        try:
            if response.getheader("Content-Type", "").startswith("text/event-stream"):
                incoming = None
                for raw in response:
                    if raw.startswith(b"data: ") and raw[6:].strip():  # 2025-11-25's priming event has no data
                        frame = json.loads(raw[6:])
                        assert not errors(self.revision, frame, "JSONRPCMessage"), frame
                        if frame.get("id") == self.next_id and "method" not in frame:
                            incoming = frame
                            break
                        self.from_server(frame)
            else:
                incoming = json.loads(response.read())
        finally:
            connection.close()
        return self.settle(method, incoming)

    def settle(self, method, incoming):
        if "error" in incoming:
            return incoming["error"]
        conforms(self.revision, incoming["result"], RESULT_OF[method])
        return incoming["result"]

    def send_line(self, message):
        connection, response = self.post(message)
        response.read()
        connection.close()
        assert response.status == 202, response.status


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_optional_field_is_shaped_for_each_revision_over_http(revision):
    from mcptest import HttpServer

    with HttpServer(EVERY_FIELD) as server:
        capabilities = {"sampling": {}, "elicitation": {}} if revision >= "2025-06-18" else {"sampling": {}}
        session = HttpSession(server, revision, capabilities, answers=FIXTURE_ANSWERS)
        session.ask("logging/setLevel", level="debug")
        every_field(session)


@pytest.mark.parametrize("revision", ["2025-11-25", "2025-03-26"])
def test_everything_conforms_over_streamable_http(revision):
    from mcptest import HttpServer

    with HttpServer(EVERYTHING) as server:
        session = HttpSession(server, revision, {"sampling": {}, "roots": {}, "elicitation": {}},
                              answers={"sampling/createMessage": {"role": "assistant", "model": "m",
                                                                  "content": {"type": "text", "text": "ok"}},
                                       "elicitation/create": {"action": "accept", "content": {"username": "u",
                                                                                              "email": "e@x"}},
                                       "roots/list": {"roots": []}})
        assert session.ask("logging/setLevel", level="debug") == {}
        every_method(session)
        session.ask("tools/call", name="test_tool_with_progress", arguments={}, _meta={"progressToken": "p"})
        session.ask("resources/read", uri="test://static-binary")
        session.ask("prompts/get", name="test_prompt_with_image")
        assert {n["method"] for n in session.notifications} >= {"notifications/progress", "notifications/message"}
