"""Prompts and resources check their own arguments, as Tool.call does, before the author's function runs;
through the pure core, so every lab cell runs them (the conformance suite, which also covers them, is
host-only)."""


import pytest
from mcpserver import ConfigError, Server
from mcpserver._context import Flight
from mcpserver._subscriptions import Listener
from mcpserver.testing import Client, ClientError
from mcptest import answer, request


@pytest.fixture
def server():
    server = Server("pr", "1.0.0")
    server.ran = []

    @server.prompt
    def review(code: str, style: str = "terse") -> str:
        """Review some code."""
        server.ran.append((code, style))
        return f"Review ({style}):\n{code}"

    @server.prompt
    def dialogue(topic: str) -> list:
        return [{"role": "user", "content": topic}, {"role": "assistant", "content": {"type": "text", "text": "ok"}}]

    @server.prompt(name="broken")
    def broken() -> list:
        return [{"role": "system", "content": "not a role of MCP"}]

    @server.resource("notes://todo", mime_type="text/plain")
    def todo() -> str:
        return "buy milk"

    @server.resource("files://logo")
    def logo() -> bytes:
        return b"\x89PNG\x00"

    @server.resource("notes://gone")
    def gone():
        return None

    @server.resource_template("users://{user}/notes/{note}")
    def user_note(user: str, note: str) -> str:
        server.ran.append((user, note))
        return f"{user}:{note}"

    return server


@pytest.fixture
def client(server):
    with Client(server) as client:
        yield client


def get(server, name, arguments=None):
    params = {"name": name} if arguments is None else {"name": name, "arguments": arguments}
    return answer(request("prompts/get", **params), server)


def read(server, **params):
    return answer(request("resources/read", **params), server)


def test_a_prompt_renders_with_its_defaults(server, client):
    result = client.get_prompt("review", {"code": "x = 1"})
    assert result.messages == [{"role": "user", "content": {"type": "text", "text": "Review (terse):\nx = 1"}}]
    assert result.description == "Review some code." and server.ran == [("x = 1", "terse")]


def test_messages_keep_their_roles_and_content_blocks(client):
    messages = client.get_prompt("dialogue", {"topic": "tea"}).messages
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == {"type": "text", "text": "ok"}


@pytest.mark.parametrize(("arguments", "says"), [
    ({"style": "long"}, "Missing required argument 'code'"),
    ({"code": "x", "colour": "red"}, "Unknown argument 'colour'"),
    ({"code": 1}, "must be an object of strings"),
    (["x"], "must be an object of strings"),
    ("x", "must be an object of strings"),
], ids=["missing", "unknown", "not-a-string", "array", "string"])
def test_bad_prompt_arguments_are_invalid_params_and_the_prompt_never_runs(server, arguments, says):
    error = get(server, "review", arguments)["error"]
    assert error["code"] == -32602 and says in error["message"]
    assert server.ran == []


@pytest.mark.parametrize("name", ["nope", 7, None])
def test_an_unknown_or_malformed_prompt_name_is_invalid_params(server, name):
    params = {} if name is None else {"name": name}
    assert answer(request("prompts/get", **params), server)["error"]["code"] == -32602


def test_a_prompt_returning_what_mcp_cannot_carry_is_the_servers_error(client):
    with pytest.raises(ClientError) as raised:
        client.get_prompt("broken", {})
    assert raised.value.code == -32603


def test_text_and_binary_resources(client):
    text = client.read_resource("notes://todo")
    assert text.contents == [{"uri": "notes://todo", "mimeType": "text/plain", "text": "buy milk"}]
    blob = client.read_resource("files://logo")
    assert blob.blob == b"\x89PNG\x00" and blob.text == ""


def test_template_variables_reach_the_reader(server, client):
    assert client.read_resource("users://ada/notes/42").text == "ada:42" and server.ran == [("ada", "42")]


@pytest.mark.parametrize("uri", ["notes://nothing", "notes://gone", "users://ada/notes"])
def test_a_uri_that_names_nothing_is_resource_not_found(client, uri):
    with pytest.raises(ClientError) as raised:
        client.read_resource(uri)
    assert (raised.value.code, raised.value.message, raised.value.data) == (-32602, "Resource not found", {"uri": uri})


@pytest.mark.parametrize("params", [{}, {"uri": 7}, {"uri": ["notes://todo"]}, {"uri": None}],
                         ids=["none", "number", "array", "null"])
def test_a_missing_or_malformed_uri_is_invalid_params_and_no_reader_runs(server, params):
    assert read(server, **params)["error"]["code"] == -32602
    assert server.ran == []


def test_registrations_that_cannot_work_are_refused_at_start_up():
    server = Server("bad", "1.0.0")
    with pytest.raises(ConfigError, match="needs a scheme"):
        server.resource("todo")(lambda: "x")
    with pytest.raises(ConfigError, match=r"every \{variable\} must be a parameter"):
        server.resource_template("users://{user}")(lambda name: name)
    with pytest.raises(ConfigError, match="name every argument"):
        server.prompt(lambda *parts: "x", name="star")


def test_removing_a_prompt_or_a_template_takes_it_off_the_lists_and_tells_listeners():
    server = Server("removals")

    @server.prompt()
    def hello() -> str:
        return "hi"

    @server.resource_template("notes://{name}")
    def note(name: str) -> str:
        return name

    heard = []  # what a subscriptions/listen stream of both lists is sent
    server.subscriptions.open(Listener("sub", {"prompts", "resources"}, set(), Flight(heard.append)))
    server.remove_prompt("hello")
    server.remove_resource_template("notes://{name}")
    assert [note["method"] for note in heard] == ["notifications/prompts/list_changed",
                                                  "notifications/resources/list_changed"]
    assert answer(request("prompts/list"), server)["error"]["code"] == -32601  # the category is gone with it
    assert answer(request("resources/read", uri="notes://a"), server)["error"]["code"] == -32601
    for remove, missing in ((server.remove_prompt, "hello"), (server.remove_resource_template, "notes://{name}")):
        with pytest.raises(KeyError):
            remove(missing)
