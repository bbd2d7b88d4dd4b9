"""`mcpserver config --client NAME`: each client's own shape and variable syntax, and docs/guides/clients.md as printed.

The shapes are those of each client's documentation (docs/guides/clients.md names the pages); what is tested
here is that the command prints exactly them, that the stdio entries start the server from anywhere,
and that an HTTP entry a client takes literally authenticates (the old `Bearer ${MCPSERVER_TOKEN}`
reached the server as that text and got 401).
"""

import json
import os
import re
import subprocess
import sys

import pytest
from mcptest import DEMO, ROOT, HttpServer, line, mcp_headers, request, responses

CLIENTS = ["claude-desktop", "claude-code", "vscode", "cursor", "generic"]
URL = "http://127.0.0.1:3000/mcp"


def config(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "mcpserver", "config", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, stdin=subprocess.DEVNULL)


def printed(*args):
    done = config(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("client", CLIENTS)
def test_each_stdio_entry_is_the_client_s_shape_and_starts_the_server_from_anywhere(client, tmp_path):
    document = json.loads(config(DEMO, "--client", client, cwd=str(tmp_path)).stdout)
    top = "servers" if client == "vscode" else "mcpServers"
    assert list(document) == [top]
    entry = document[top]["demo"]
    assert entry.get("type") == ("stdio" if client in ("claude-code", "vscode") else None)
    assert os.path.isabs(entry["command"]) and entry["args"][:2] == ["-m", "mcpserver"]
    assert os.path.isabs(entry["args"][-1])
    done = subprocess.run([entry["command"], *entry["args"]], input=line(request("tools/list")), capture_output=True,
                          timeout=30, cwd="/", env={**os.environ, **entry.get("env", {})})
    assert [t["name"] for t in responses(done.stdout)[0]["result"]["tools"]] == ["echo", "add", "big"]


def test_each_http_entry_is_the_client_s_shape_and_variable_syntax():
    assert printed(DEMO, "--client", "claude-code", "--http", URL) == {"mcpServers": {"demo": {
        "type": "http", "url": URL, "headers": {"Authorization": "Bearer ${MCPSERVER_TOKEN}"}}}}
    assert printed(DEMO, "--client", "cursor", "--http", URL) == {"mcpServers": {"demo": {
        "url": URL, "headers": {"Authorization": "Bearer ${env:MCPSERVER_TOKEN}"}}}}
    assert printed(DEMO, "--client", "vscode", "--http", URL) == {
        "servers": {"demo": {"type": "http", "url": URL, "headers": {"Authorization": "Bearer ${input:demo-token}"}}},
        "inputs": [{"type": "promptString", "id": "demo-token", "password": True,
                    "description": f"The bearer token of the MCP server at {URL}"}]}
    assert printed(DEMO, "--client", "generic", "--http", URL) == {"mcpServers": {"demo": {"type": "http", "url": URL}}}


def test_a_named_token_variable_is_spelled_in_each_client_s_syntax():
    headers = {client: printed(DEMO, "--client", client, "--http", URL, "--token-env", "MY_TOKEN")
               for client in ("claude-code", "cursor", "vscode")}
    assert headers["claude-code"]["mcpServers"]["demo"]["headers"] == {"Authorization": "Bearer ${MY_TOKEN}"}
    assert headers["cursor"]["mcpServers"]["demo"]["headers"] == {"Authorization": "Bearer ${env:MY_TOKEN}"}
    assert headers["vscode"] == {"servers": {"demo": {"type": "http", "url": URL,
                                                      "headers": {"Authorization": "Bearer ${env:MY_TOKEN}"}}}}


@pytest.mark.parametrize("client", ["claude-code", "vscode", "cursor", "generic"])
def test_no_token_means_no_authorization_header(client):
    document = printed(DEMO, "--client", client, "--http", URL, "--no-token")
    assert "headers" not in next(iter(document["servers" if client == "vscode" else "mcpServers"].values()))
    assert "inputs" not in document


def test_claude_desktop_takes_no_http_entry_and_says_where_remote_servers_go():
    done = config(DEMO, "--client", "claude-desktop", "--http", URL)
    assert done.returncode == 2 and done.stdout == ""
    assert "Connectors" in done.stderr and "stdio" in done.stderr and "Traceback" not in done.stderr


def test_the_generic_http_entry_authenticates_as_printed(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-0123456789\n")
    entry = printed(DEMO, "--http", URL, "--token-file", str(token_file))["mcpServers"]["demo"]
    assert "${" not in json.dumps(entry)  # a client that expands nothing would send a ${VAR} as is
    with HttpServer(DEMO, "--token-file", str(token_file)) as server:
        message = request("tools/list")
        headers = mcp_headers(message)
        status, _, _ = server.post(message, headers={**headers, **entry["headers"]})
        assert status == 200
        literal, _, _ = server.post(message, headers={**headers, "Authorization": "Bearer ${MCPSERVER_TOKEN}"})
        assert literal == 401  # what the old printed entry sent
        assert server.stop() == 0


def test_a_token_file_is_only_for_the_shape_that_expands_nothing(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    done = config(DEMO, "--client", "cursor", "--http", URL, "--token-file", str(token_file))
    assert done.returncode == 2 and "--token-env" in done.stderr and "s3cret" not in done.stdout + done.stderr


def test_each_entry_says_where_it_goes_and_whose_shape_it_is():
    for client, page in [("claude-desktop", "modelcontextprotocol.io"), ("claude-code", "code.claude.com"),
                         ("vscode", "code.visualstudio.com"), ("cursor", "cursor.com"), ("generic", "gofastmcp")]:
        assert page in config(DEMO, "--client", client).stderr


# --- docs/guides/clients.md shows what the command prints ---------------------------------------------------------

DOC = os.path.join(ROOT, "docs", "guides", "clients.md")
HELLO = '''from mcpserver import Server

server = Server("hello", "1.0.0")


@server.tool()
def greet(name: str) -> str:
    return f"Hello, {name}"
'''


def documented_commands():
    """(command line, the JSON printed under it) for every `mcpserver config` example in docs/guides/clients.md."""
    with open(DOC, encoding="utf-8") as file:
        text = file.read()
    pairs = re.findall(r"```sh\n(mcpserver config [^\n]*)\n```\n+```json\n(.*?)\n```", text, re.DOTALL)
    return [(command, json.loads(body)) for command, body in pairs]


def normalized(document):
    """The document with the machine's interpreter and paths as the docs write them."""
    text = json.dumps(document)
    for entry in next(iter(v for k, v in document.items() if k != "inputs")).values():
        if "command" in entry:
            text = text.replace(json.dumps(entry["command"]), '"/home/ada/.venvs/tools/bin/python"')
            text = text.replace(json.dumps(entry["args"][-1]), '"/home/ada/tools/hello.py"')
    cleaned = json.loads(text)
    for entry in next(iter(v for k, v in cleaned.items() if k != "inputs")).values():
        entry.pop("env", None)  # PYTHONPATH, in a checkout only; the docs show an installed package
    return cleaned


@pytest.mark.host_only("reads docs/guides/clients.md, which the lab's images do not carry")
def test_docs_clients_md_shows_each_client_s_entry_as_the_command_prints_it(tmp_path):
    (tmp_path / "hello.py").write_text(HELLO)
    commands = documented_commands()
    shown = {re.search(r"--client (\S+)", command).group(1) for command, _ in commands if "--client" in command}
    assert shown == set(CLIENTS)
    assert len(commands) >= 8  # stdio for five clients, HTTP for the four that take it
    for command, documented in commands:
        words = command.split()[2:]
        done = config(*[str(tmp_path / w) if w == "hello.py" else w for w in words], cwd=str(tmp_path))
        assert done.returncode == 0, (command, done.stderr)
        assert normalized(json.loads(done.stdout)) == documented, command
