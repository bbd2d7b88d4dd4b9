"""MCP Apps (mcpserver._apps, io.modelcontextprotocol/ui): ui:// pages with their _meta.ui, tools linked to them,
the extension declared, and each legacy revision sent only what it has. The page in a real browser, with the
official host-side AppBridge: tests/apps/test_browser.py."""

import re

import pytest
from mcpserver import ConfigError, Server
from mcpserver.testing import Client

PAGE = "<!DOCTYPE html>\n<html><body><p id=result></p></body></html>\n"
MIME = "text/html;profile=mcp-app"


def test_an_app_is_a_ui_resource_whose_listing_and_contents_carry_its_meta():
    server = Server("apps")
    server.app("ui://weather/dashboard", PAGE, title="Weather", description="Today's weather.",
               csp={"connectDomains": ["https://api.weather.example"], "resourceDomains": ["https://cdn.example"]},
               permissions=["geolocation", "clipboardWrite"], domain="a1b2.example-host.com", prefers_border=False)
    ui = {"csp": {"connectDomains": ["https://api.weather.example"], "resourceDomains": ["https://cdn.example"]},
          "permissions": {"geolocation": {}, "clipboardWrite": {}}, "domain": "a1b2.example-host.com",
          "prefersBorder": False}
    with Client(server) as client:
        assert client.list_resources() == [{"uri": "ui://weather/dashboard", "name": "weather/dashboard",
                                            "title": "Weather", "description": "Today's weather.", "mimeType": MIME,
                                            "_meta": {"ui": ui}}]
        assert client.read_resource("ui://weather/dashboard").contents == [
            {"uri": "ui://weather/dashboard", "mimeType": MIME, "text": PAGE, "_meta": {"ui": ui}}]


def test_an_app_without_settings_has_no_meta_and_the_host_applies_its_default(tmp_path):
    server = Server("apps")
    page = tmp_path / "page.html"
    page.write_text(PAGE)
    server.app("ui://page", path=str(page))
    with Client(server) as client:
        assert client.read_resource("ui://page").contents == [{"uri": "ui://page", "mimeType": MIME, "text": PAGE}]
        page.write_text(PAGE.replace("result", "edited"))  # a page from a file is read at every read
        assert "edited" in client.read_resource("ui://page").text


@pytest.mark.parametrize(("uri", "arguments", "says"), [
    ("https://x/page", {"html": PAGE}, "an app's URI starts with ui://"),
    ("ui://", {"html": PAGE}, "an app's URI starts with ui://"),
    ("ui://x", {}, "give its page as html=TEXT or path=FILE, one of them"),
    ("ui://x", {"html": PAGE, "path": "page.html"}, "one of them"),
    ("ui://x", {"html": "<p>a fragment</p>"}, "a whole HTML5 document: it opens with <!DOCTYPE html>"),
    ("ui://x", {"html": b"<!DOCTYPE html>"}, "html is the page's text, not bytes"),
    ("ui://x", {"path": "/no/such/page.html"}, "cannot read /no/such/page.html"),
    ("ui://x", {"html": PAGE, "csp": {"connectDomain": ["https://a"]}}, "unknown csp key 'connectDomain'"),
    ("ui://x", {"html": PAGE, "csp": {"connectDomains": "https://a"}}, "csp['connectDomains'] is a list of origins"),
    ("ui://x", {"html": PAGE, "csp": ["https://a"]}, "csp maps connectDomains"),
    ("ui://x", {"html": PAGE, "permissions": ["clipboard-write"]}, "unknown permission 'clipboard-write'"),
    ("ui://x", {"html": PAGE, "domain": ""}, "domain is a host name"),
    ("ui://x", {"html": PAGE, "prefers_border": "yes"}, "prefers_border is True or False"),
])
def test_an_app_that_cannot_be_one_is_refused_saying_why(uri, arguments, says):
    with pytest.raises(ConfigError, match=f"app {uri!r}: .*{re.escape(says)}"):
        Server("apps").app(uri, **arguments)


def test_a_linked_tool_carries_the_app_and_its_visibility_beside_its_own_meta():
    server = Server("apps")
    server.app("ui://board", PAGE)

    @server.tool(ui="ui://board", meta={"com.example/owner": "team"})
    def show_board() -> str:
        """Show the board."""
        return "the board"

    @server.tool(ui="ui://board", visibility=["app"])
    def move(piece: str) -> str:
        """Move a piece (only the board calls this)."""
        return piece

    @server.tool(visibility=("model",))
    def plain() -> str:
        """No app of its own."""
        return "plain"

    with Client(server) as client:
        metas = {tool["name"]: tool["_meta"] for tool in client.list_tools()}
        assert metas == {"show_board": {"com.example/owner": "team",
                                        "ui": {"resourceUri": "ui://board", "visibility": ["model", "app"]}},
                         "move": {"ui": {"resourceUri": "ui://board", "visibility": ["app"]}},
                         "plain": {"ui": {"visibility": ["model"]}}}
        assert client.call_tool("move", {"piece": "e4"}).text == "e4"  # the server lists and serves it: hosts filter


@pytest.mark.parametrize(("link", "says"), [
    ({"ui": "ui://board"}, "ui='ui://board' is no app of this server; register it first with server.app"),
    ({"ui": "notes://plain"}, "is no app of this server"),  # a resource, but no app
    ({"ui": "ui://app", "visibility": []}, "visibility lists who may call it"),
    ({"ui": "ui://app", "visibility": ["agent"]}, "visibility lists who may call it"),
    ({"ui": "ui://app", "visibility": ["app", "app"]}, "visibility lists who may call it"),
])
def test_a_link_to_no_app_or_a_visibility_that_is_none_is_refused_at_registration(link, says):
    server = Server("apps")
    server.app("ui://app", PAGE)
    server.resource("notes://plain")(lambda: "text")
    with pytest.raises(ConfigError, match=f"tool 'shown': .*{re.escape(says)}"):
        server.tool(name="shown", **link)(lambda: "x")
    assert "shown" not in server.tools


def test_the_extension_is_declared_beside_the_others_only_by_a_server_with_an_app(tmp_path):
    plain = Server("plain")
    plain.resource("notes://x")(lambda: "x")
    with Client(plain) as client:
        assert "extensions" not in client.discover().capabilities
    server = Server("all")
    server.app("ui://app", PAGE)
    server.skills(str(tmp_path))

    @server.tool(task="optional")
    def slow() -> str:
        return "done"

    with Client(server) as client:
        assert client.discover().capabilities["extensions"] == {
            "io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {"directoryRead": True},
            "io.modelcontextprotocol/ui": {}}


@pytest.mark.parametrize(("revision", "meta"), [("2025-11-25", True), ("2025-06-18", True), ("2025-03-26", False),
                                                ("2024-11-05", False)])
def test_a_legacy_session_gets_the_apps_meta_where_its_revision_has_meta_and_no_extension(revision, meta):
    server = Server("apps")
    server.app("ui://app", PAGE, prefers_border=True)
    server.tool(name="linked", ui="ui://app")(lambda: "x")
    with Client(server, era="legacy", revision=revision) as client:
        assert "extensions" not in client.initialize_result["capabilities"]  # no legacy schema has extensions
        assert ("_meta" in client.list_tools()[0]) is meta
        assert ("_meta" in client.list_resources()[0]) is meta
        contents = client.read_resource("ui://app").contents[0]
        assert ("_meta" in contents) is meta and contents["mimeType"] == MIME and contents["text"] == PAGE
