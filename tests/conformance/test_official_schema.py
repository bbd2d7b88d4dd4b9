"""Every response the examples give, for every method and every error path, validates against the
vendored official 2026-07-28 schema; the spec's own example requests are accepted."""

import glob
import json
import os

import official_schemas
import pytest
from mcptest import DEMO, GIT, META, MOVIES, ROOT, VERSION, HttpServer, StdioServer, call, mcp_headers, request

SPEC = os.path.join(ROOT, "spec")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spec_fixtures.py")
DICE = os.path.join(ROOT, "server", "examples", "dice.py")

RESULT_OF = {
    "server/discover": "DiscoverResult", "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult", "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult", "prompts/list": "ListPromptsResult", "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult", "subscriptions/listen": "SubscriptionsListenResult",
}
NOTIFICATION_OF = {"notifications/progress": "ProgressNotification",
                   "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
                   "notifications/tools/list_changed": "ToolListChangedNotification",
                   "notifications/resources/list_changed": "ResourceListChangedNotification",
                   "notifications/resources/updated": "ResourceUpdatedNotification",
                   "notifications/cancelled": "CancelledNotification"}
ERROR_OF = {-32700: "ParseError", -32600: "InvalidRequestError", -32601: "MethodNotFoundError",
            -32602: "InvalidParamsError", -32603: "InternalError"}
RESPONSE_ERROR_OF = {-32020: "HeaderMismatchError", -32021: "MissingRequiredClientCapabilityError",
                     -32022: "UnsupportedProtocolVersionError"}


def conforms(instance, definition):
    """Fits one $defs entry of the official schema, with no key it does not declare; raise with the reason."""
    official_schemas.conforms(VERSION, instance, definition)


def check(message, response):
    """A response conforms: as a JSON-RPC message, and as the specific result or error of its method."""
    conforms(response, "JSONRPCMessage")
    if "result" in response:
        conforms(response, "JSONRPCResultResponse")
        if response["result"]["resultType"] == "input_required":
            assert message["method"] in ("tools/call", "prompts/get", "resources/read")
            conforms(response["result"], "InputRequiredResult")
            return "input_required"
        conforms(response["result"], RESULT_OF[message["method"]])
        return "result"
    conforms(response, "JSONRPCErrorResponse")
    code = response["error"]["code"]
    if code in RESPONSE_ERROR_OF:
        conforms(response, RESPONSE_ERROR_OF[code])
    else:
        conforms(response["error"], ERROR_OF[code])
    return code


bad_version = dict(META, **{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})
ERROR_PATHS = [
    (request("server/discover", meta=bad_version), -32022),
    (request("tools/list", meta={}), -32602),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, -32602),
    (request("initialize"), -32601),
    (request("ping"), -32601),
    (request("logging/setLevel", level="debug"), -32601),
    (request("completion/complete"), -32601),
    (request("subscriptions/listen"), -32602),
    (request("tools/list", cursor="not-a-cursor"), -32602),
    (call("no_such_tool"), -32602),
    (request("tools/call", name=5), -32602),
    ({"jsonrpc": "2.0", "id": None, "method": "tools/list", "params": {"_meta": META}}, -32600),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list", "params": {"_meta": META}}, -32600),
    ([request("tools/list")], -32600),
]


def success_paths(target):
    """Requests that succeed on each example: every method it offers, every tool it has."""
    if target == DEMO:
        tools = [call("echo", text="héllo"), call("add", a=2, b=3.5), call("big", size=1000), call("echo", text=1)]
        return [request("server/discover"), request("tools/list"), *tools]
    if target == MOVIES:
        return [request("server/discover"), request("tools/list"), call("search_movies", genre="drama"),
                call("book_tickets", movie_id="m4", showtime="20:00", adults=5, children=1),
                call("book_tickets", movie_id="m9", showtime="20:00", adults=1),
                request("resources/list"), request("resources/templates/list"),
                request("resources/read", uri="movies://catalogue"), request("resources/read", uri="movies://films/m1"),
                request("prompts/list"), request("prompts/get", name="recommend", arguments={"mood": "sleepy"})]
    if target == DICE:
        return [request("server/discover"), request("tools/list"), request("resources/list"),
                request("resources/read", uri="ui://dice/roller"), call("roll_dice", count=3), call("roll_history")]
    return [request("server/discover"), request("tools/list"), call("git_status"), call("git_log", max_count=3),
            call("git_diff", staged=True)]


EXAMPLE_ERRORS = {
    MOVIES: [(request("resources/read", uri="movies://films/none"), -32602),
             (request("prompts/get", name="recommend"), -32602),
             (request("prompts/get", name="nope", arguments={}), -32602),
             (request("prompts/get", name="recommend", arguments={"mood": 3}), -32602)],
    DEMO: [(request("prompts/list"), -32601), (request("resources/read", uri="x://y"), -32601)],
}


@pytest.mark.parametrize("target", [DEMO, MOVIES, GIT, DICE], ids=["demo", "movies", "git", "dice"])
def test_every_stdio_response_of_every_example_conforms(target):
    with StdioServer(target) as server:
        for message in success_paths(target):
            response = server.ask(message)
            assert check(message, response) == "result", response
        for message, code in ERROR_PATHS + EXAMPLE_ERRORS.get(target, []):
            response = server.ask(message)
            assert check(message, response) == code, (message, response)
        server.send(b"{broken json\n")
        assert check({}, server.receive()) == -32700


def test_every_http_response_conforms_and_header_errors_too():
    with HttpServer(MOVIES) as server:
        for message in success_paths(MOVIES):
            status, _, response = server.post(message)
            assert status == 200 and check(message, response) == "result"
        for message, code in ERROR_PATHS + EXAMPLE_ERRORS[MOVIES]:
            if isinstance(message, dict) and message.get("params", {}).get("name") == 5:
                code = -32020  # a name that is not a string cannot be mirrored in Mcp-Name
            status, _, response = server.post(message, headers=mcp_headers(message) if isinstance(message, dict)
                                              else mcp_headers(request("tools/list")))
            assert check(message, response) == code, (message, response)
        message = call("search_movies")
        status, _, response = server.post(message, headers=dict(mcp_headers(message), **{"Mcp-Name": "other"}))
        assert status == 400 and check(message, response) == -32020


def example(path):
    with open(os.path.join(SPEC, "examples-2026-07-28", path), encoding="utf-8") as file:
        return json.load(file)


REQUEST_EXAMPLES = sorted(
    os.path.relpath(p, os.path.join(SPEC, "examples-2026-07-28"))
    for folder in ("DiscoverRequest", "ListToolsRequest", "CallToolRequest", "ListResourcesRequest",
                   "ListResourceTemplatesRequest", "ReadResourceRequest", "ListPromptsRequest", "GetPromptRequest")
    for p in glob.glob(os.path.join(SPEC, "examples-2026-07-28", folder, "*.json")))


def test_the_spec_request_examples_are_all_here():
    assert len(REQUEST_EXAMPLES) == 8


@pytest.fixture(scope="module")
def fixtures_server():
    with StdioServer(FIXTURES) as server:
        yield server


@pytest.mark.parametrize("path", REQUEST_EXAMPLES)
def test_the_spec_example_requests_are_accepted(fixtures_server, path):
    message = example(path)
    response = fixtures_server.ask(message)
    assert check(message, response) == "result", response
    assert response["id"] == message["id"]


@pytest.mark.parametrize("path", ["CallToolRequestParams/get-weather-tool-call-params.json",
                                  "CallToolRequestParams/tool-call-params-with-progress-token.json"])
def test_the_spec_example_call_params_are_accepted(fixtures_server, path):
    message = {"jsonrpc": "2.0", "id": path, "method": "tools/call", "params": example(path)}
    assert check(message, fixtures_server.ask(message)) == "result"


def test_a_cursor_we_did_not_issue_is_refused_as_the_spec_says(fixtures_server):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
               "params": example("PaginatedRequestParams/list-with-cursor.json")}
    assert fixtures_server.ask(message)["error"] == example("InvalidParamsError/invalid-cursor.json")


def test_the_spec_example_tools_register_and_list_as_written(fixtures_server):
    listed = {t["name"]: t for t in fixtures_server.ask(request("tools/list"))["result"]["tools"]}
    for path in glob.glob(os.path.join(SPEC, "examples-2026-07-28", "Tool", "*.json")):
        definition = example(os.path.relpath(path, os.path.join(SPEC, "examples-2026-07-28")))
        conforms(listed[definition["name"]], "Tool")
    find = {"name": "find_resource"}
    composition = fixtures_server.ask(request("tools/call", **find, arguments={"id": "abc"}))["result"]
    assert "isError" not in composition
    both = fixtures_server.ask(request("tools/call", **find, arguments={"id": "abc", "name": "n"}))["result"]
    assert both["isError"] is True  # oneOf: exactly one form may match


def test_error_shapes_match_the_spec_examples(fixtures_server):
    assert fixtures_server.ask(call("invalid_tool_name"))["error"] == example("InvalidParamsError/unknown-tool.json")
    unknown_prompt = fixtures_server.ask(request("prompts/get", name="invalid_prompt_name"))["error"]
    assert unknown_prompt == example("InvalidParamsError/unknown-prompt.json")
    missing = fixtures_server.ask(request("resources/read", uri="file:///project/none.rs"))["error"]
    assert missing == {"code": -32602, "message": "Resource not found", "data": {"uri": "file:///project/none.rs"}}
    blob = fixtures_server.ask(request("resources/read", uri="file:///project/logo.png"))["result"]["contents"][0]
    conforms(blob, "BlobResourceContents")


EVERYTHING = os.path.join(ROOT, "server", "examples", "everything.py")
NOTES = os.path.join(ROOT, "server", "examples", "notes.py")
ALL_CAPABILITIES = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {},
                                                                               "roots": {}}})


ANSWERS = {
    "user_name": {"action": "accept", "content": {"name": "Ada"}},
    "confirm": {"action": "accept", "content": {"ok": True}},
    "capital_question": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "Paris"}},
    "greeting": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "Hi"}},
    "client_roots": {"roots": [{"uri": "file:///tmp"}]},
    "step1": {"action": "accept", "content": {"name": "Ada"}},
    "step2": {"action": "accept", "content": {"color": "red"}},
    "llm": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "an answer"}},
    "user_info": {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}},
    "defaults": {"action": "accept", "content": {"name": "John Doe", "age": 30}},
    "enums": {"action": "decline"},
    "first": {"action": "accept", "content": {"name": "Ada"}},
    "second": {"action": "accept", "content": {"name": "Paris"}},
}


def test_every_answer_of_the_conformance_fixture_conforms_rounds_and_notifications_too():
    with StdioServer(EVERYTHING) as server:
        listed = request("tools/list")
        tools = server.ask(listed)["result"]["tools"]
        assert check(listed, server.ask(listed)) == "result"
        for tool in tools:
            arguments = {"region": "eu", "query": "q"} if tool["name"] == "test_header_params" else {}
            message = request("tools/call", meta=ALL_CAPABILITIES, name=tool["name"], arguments=arguments)
            response = server.ask(message)
            for _ in range(3):  # answer each round as a client would, until the call completes
                if check(message, response) != "input_required":
                    break
                asked = response["result"]["inputRequests"]
                for input_request in asked.values():
                    conforms(input_request, "InputRequest")
                message = request("tools/call", meta=ALL_CAPABILITIES, name=tool["name"], arguments=arguments,
                                  inputResponses={key: ANSWERS[key] for key in asked},
                                  requestState=response["result"]["requestState"])
                response = server.ask(message)
            expected = {"failing_job": -32021, "test_tool_with_task": -32021,  # tasks only: no extension here
                        "protocol_error_job": -32603}.get(tool["name"], "result")
            assert check(message, response) == expected, (tool["name"], response)
        for message in (request("completion/complete", ref={"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                                argument={"name": "arg1", "value": "pa"}),
                        request("prompts/get", name="test_prompt_with_embedded_resource",
                                arguments={"resourceUri": "test://x"}),
                        request("resources/read", uri="test://template/7/data")):
            assert check(message, server.ask(message)) == "result"
        message = request("tools/call", meta=dict(ALL_CAPABILITIES, progressToken=1), name="test_tool_with_progress",
                          arguments={})
        server.send((json.dumps(message) + "\n").encode())
        while "id" not in (note := server.receive()):
            conforms(note, NOTIFICATION_OF[note["method"]])
        assert check(message, note) == "result"


def test_every_notification_of_a_subscription_conforms():
    with StdioServer(NOTES) as server:
        server.ask(call("write_note", name="n", text="1"))
        listen = request("subscriptions/listen", "sub", notifications={
            "toolsListChanged": True, "resourcesListChanged": True, "resourceSubscriptions": ["notes://n"]})
        server.send((json.dumps(listen) + "\n").encode())
        for step in (call("write_note", id="a", name="n", text="2"), call("write_note", id="b", name="m", text="1"),
                     call("enable_shouting", id="c")):
            server.send((json.dumps(step) + "\n").encode())
        seen = []
        while len([m for m in seen if "id" in m]) < 3:
            seen.append(server.receive())
        for note in (m for m in seen if "id" not in m):
            conforms(note, NOTIFICATION_OF[note["method"]])
        assert {m["method"] for m in seen if "id" not in m} == set(NOTIFICATION_OF) - {
            "notifications/progress", "notifications/cancelled"}
        code, rest = server.close()
        assert code == 0
        closing = [json.loads(raw) for raw in rest.splitlines()]
        assert check(listen, closing[0]) == "result"
        conforms(closing[1], "CancelledNotification")
