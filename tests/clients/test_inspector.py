"""The MCP Inspector's CLI (npm @modelcontextprotocol/inspector, pinned in client_tools) with its default
settings: no protocol-era flag, so an ad-hoc target gets its default era, legacy (the initialize
handshake). It prints only the result, so the wire is read from a tap in front of the server: tap.py
on stdio, a TCP relay over HTTP."""

import json
import os

import pytest
from client_tools import LEGACY_VERSIONS, TRANSPORTS, TcpTap, example_path, inspector, server_argv, tap_argv, tapped
from mcpserver import load_target
from mcptest import EXAMPLES


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


def run(transport, tmp_path, example, *args):
    """`inspector --cli TARGET ARGS` against `example`; (finished process, revision asked, revision given)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if transport == "stdio":
        log = str(tmp_path / "wire.jsonl")
        done = inspector(*tap_argv(log, server_argv(example)), *args, cwd=str(home))
        wire = tapped(log)
        to_server = [entry["message"] for entry in wire if entry["to"] == "server"]
        to_client = [entry["message"] for entry in wire if entry["to"] == "client"]
        assert to_server[0]["method"] == "initialize", to_server[0]
        assert {"jsonrpc": "2.0", "method": "notifications/initialized"} in to_server
        assert "server/discover" not in [m.get("method") for m in to_server]
        asked = [to_server[0]["params"]["protocolVersion"]]
        given = [m["result"]["protocolVersion"] for m in to_client if m.get("id") == to_server[0]["id"]]
        return done, asked, given
    from mcptest import HttpServer

    with HttpServer(example_path(example)) as server:
        tap = TcpTap(server.port)
        try:
            done = inspector(f"http://127.0.0.1:{tap.port}{server.path}", *args, cwd=str(home))
        finally:
            tap.close()
        asked, given = tap.versions()
        assert server.stop() == 0, server.stderr
    return done, asked, given


def check_legacy(done, asked, given):
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(asked) == 1 and asked[0] in LEGACY_VERSIONS, asked
    assert given == asked, (asked, given)  # a revision we serve is echoed


def test_the_inspector_lists_tools(transport, tmp_path):
    done, asked, given = run(transport, tmp_path, "demo.py", "--method", "tools/list")
    check_legacy(done, asked, given)
    tools = json.loads(done.stdout)["tools"]
    assert [tool["name"] for tool in tools] == ["echo", "add", "big"]
    assert tools[1]["outputSchema"]["required"] == ["sum"]  # 2025-11-25 has output schemas


def test_the_inspector_calls_a_tool(transport, tmp_path):
    done, asked, given = run(transport, tmp_path, "demo.py", "--method", "tools/call", "--tool-name", "echo",
                             "--tool-arg", "text=hi")
    check_legacy(done, asked, given)
    assert json.loads(done.stdout) == {"content": [{"type": "text", "text": "hi"}]}


def test_the_inspector_gets_structured_content(transport, tmp_path):
    done, asked, given = run(transport, tmp_path, "demo.py", "--method", "tools/call", "--tool-name", "add",
                             "--tool-arg", "a=2", "--tool-arg", "b=3")
    check_legacy(done, asked, given)
    assert json.loads(done.stdout)["structuredContent"] == {"sum": 5}


@pytest.mark.parametrize("example", ["interactive.py", "long_running.py", "everything.py"])
def test_the_inspector_lists_each_examples_tools(transport, tmp_path, example):
    done, asked, given = run(transport, tmp_path, example, "--method", "tools/list")
    check_legacy(done, asked, given)
    registered = load_target(os.path.join(EXAMPLES, example)).tools  # every one the example has, no other
    assert [tool["name"] for tool in json.loads(done.stdout)["tools"]] == list(registered)


def test_a_tool_that_needs_elicitation_tells_the_inspector_why(transport, tmp_path):
    """The Inspector's CLI declares no elicitation: the tool answers with a readable error, at once."""
    done, asked, given = run(transport, tmp_path, "interactive.py", "--method", "tools/call", "--tool-name",
                             "delete_file", "--tool-arg", "path=/tmp/x")
    assert done.returncode == 5, done.stderr[-3000:]  # the Inspector's exit status for an isError result
    assert asked == given and asked[0] in LEGACY_VERSIONS
    result = json.loads(done.stdout)
    assert result["isError"] and "elicitation" in result["content"][0]["text"]
