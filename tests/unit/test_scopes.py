"""Scopes of one tool, resource or prompt (mcpserver._scopes): what a registration accepts, what each request
needs, and what stdio does with them (nothing: no token carries scopes there). The HTTP refusal itself, with its
challenge, is tests/http/test_http_scopes.py.
"""

import json
import os

import pytest
from mcpserver import ConfigError, Server
from mcpserver._loader import load_manifest
from mcpserver._scopes import MAX_SCOPES, every_scope, needed, scope_set
from mcpserver.auth import ResourceServer, StaticTokens
from mcptest import ROOT, StdioServer, call, request

SCOPED = os.path.join(ROOT, "tests", "scoped_tools.py")


@pytest.mark.parametrize("given, kept", [
    (["files:write"], {"files:write"}),
    ("files:read files:write", {"files:read", "files:write"}),  # one string: OAuth's scope parameter, split
    (("a", "a", "b"), {"a", "b"}),
    ([], set()),
    (None, set()),
    (["https://api.example.com/files.write"], {"https://api.example.com/files.write"}),  # URLs are scopes too
])
def test_scopes_are_kept_as_a_set_of_tokens(given, kept):
    assert scope_set(given, "tool 't'") == kept


@pytest.mark.parametrize("given, says", [
    (['files"write'], "not a scope"),  # would end the challenge's quoted-string
    (["files\\write"], "not a scope"),  # an escape RFC 6750 §3 does not allow
    (["files:read files:write"], "holds a space, so it is several scopes"),  # one list item, two scopes
    (["files\twrite"], "holds a space"),
    (["files\r\nX-Injected: 1"], "holds a space"),  # a header split, were it ever echoed
    (["café"], "not a scope"),
    ([""], "not a scope"),
    ("   ", "empty string"),
    ([b"files:write"], "not a scope"),
    (b"files:write", "must be a list of scope names"),
    ({"files:write": True}, "must be a list of scope names"),
    (7, "must be a list of scope names"),
    (["x" * 257], "not a scope"),
    ([f"s{n}" for n in range(MAX_SCOPES + 1)], f"at most {MAX_SCOPES} scopes"),
])
def test_a_scope_that_is_no_scope_token_is_refused_when_registered(given, says):
    with pytest.raises(ConfigError, match=says):
        scope_set(given, "tool 't'")
    server = Server("s")
    with pytest.raises(ConfigError, match="tool 'write'"):
        server.tool(name="write", scopes=given)(lambda: "x")
    assert not server.tools and not server.scoped  # nothing half-registered


def test_every_kind_of_entry_takes_scopes_and_the_server_knows_it_has_some():
    server = Server("s")
    server.tool(name="plain")(lambda: "x")
    assert not server.scoped
    server.prompt(name="p", scopes=["p:use"])(lambda: "x")
    assert server.scoped
    server.resource("notes://a", scopes="n:read")(lambda: "a")
    server.resource_template("notes://by/{who}", scopes=["n:read", "n:list"])(lambda who: who)
    server.command("echo", ["echo", "hi"], scopes=["run"])
    with pytest.raises(ConfigError, match="resource 'notes://b'"):
        server.resource("notes://b", scopes=['"'])(lambda: "b")
    with pytest.raises(ConfigError, match="prompt 'q'"):
        server.prompt(name="q", scopes=["a b"])(lambda: "x")
    assert every_scope(server) == {"p:use", "n:read", "n:list", "run"}


def test_what_each_request_needs_is_its_entrys_scopes():
    import scoped_tools

    server = scoped_tools.server
    assert needed(server, "tools/call", {"name": "write_file"}) == {"files:write"}
    assert needed(server, "tools/call", {"name": "wipe"}) == {"files:write", "admin:all"}
    assert needed(server, "tools/call", {"name": "whoami"}) == set()
    assert needed(server, "tools/call", {"name": "no_such_tool"}) == set()  # the call answers "unknown tool"
    assert needed(server, "tools/call", {"name": ["write_file"]}) == set()  # malformed: the method says so
    assert needed(server, "tools/list", {}) == set()  # listing needs nothing more
    assert needed(server, "prompts/get", {"name": "review"}) == {"prompts:use"}
    assert needed(server, "resources/read", {"uri": "notes://secret"}) == {"notes:read"}
    assert needed(server, "resources/read", {"uri": "notes://by/ada"}) == {"notes:read"}
    assert needed(server, "resources/subscribe", {"uri": "notes://by/ada"}) == {"notes:read"}
    assert needed(server, "resources/read", {"uri": "notes://public"}) == set()
    assert needed(server, "subscriptions/listen", {"notifications": {
        "resourceSubscriptions": ["notes://public", "notes://secret", 5]}}) == {"notes:read"}
    assert needed(server, "subscriptions/listen", {"notifications": "all"}) == set()


def test_a_manifests_command_tool_takes_scopes(tmp_path):
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"name": "m", "tools": [
        {"name": "push", "command": ["true"], "scopes": ["repo:write"]},
        {"name": "pull", "command": ["true"], "scopes": "repo:read repo:list"}]}))
    server = load_manifest(str(manifest))
    assert server.tools["push"].scopes == {"repo:write"} and server.tools["pull"].scopes == {"repo:read", "repo:list"}
    manifest.write_text(json.dumps({"name": "m", "tools": [{"name": "push", "command": ["true"],
                                                           "scopes": ["repo write"]}]}))
    with pytest.raises(ConfigError, match=r"tool 'push'.*holds a space"):
        load_manifest(str(manifest))


def test_the_servers_own_scopes_are_checked_the_same_way():
    assert ResourceServer("http://127.0.0.1:3000/mcp", ["http://127.0.0.1:9000"],
                          scopes="mcp:read mcp:write").metadata["scopes_supported"] == ["mcp:read", "mcp:write"]
    with pytest.raises(ValueError, match="several scopes"):
        ResourceServer("http://127.0.0.1:3000/mcp", ["http://127.0.0.1:9000"], scopes=["mcp:read mcp:write"])
    with pytest.raises(ValueError, match="not a scope"):
        ResourceServer("http://127.0.0.1:3000/mcp", ["http://127.0.0.1:9000"], scopes=['mcp"read'])
    principal = StaticTokens(["t0ken"], scopes="a b")("t0ken")
    assert principal.scopes == {"a", "b"}


def test_over_stdio_there_is_no_token_and_scoped_entries_are_served_as_any_other():
    with StdioServer(SCOPED) as server:
        answer = server.ask(call("write_file", path="/s"))
        assert answer["result"]["content"][0]["text"] == "wrote /s"
        assert server.ask(request("prompts/get", name="review", arguments={"code": "c"}))["result"]["messages"]
        assert server.ask(request("resources/read", uri="notes://secret"))["result"]["contents"][0]["text"] == \
            "the secret"
