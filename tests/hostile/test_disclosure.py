"""What a client can learn that it should not: the server's secrets in a command tool's environment."""

import os

from mcptest import StdioServer, call

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_tools.py")
SECRETS = {"MCPSERVER_STATE_KEY": "state-key-of-the-replicas", "MCPSERVER_TOKEN": "bearer-token-of-the-server"}


def text(answer) -> str:
    return answer["result"]["content"][0]["text"]


def test_a_command_tool_never_sees_the_servers_secrets():
    with StdioServer(TOOLS, env=SECRETS) as server:
        printed = text(server.ask(call("environment")))
    assert "PATH=" in printed  # the program did print its environment
    for name, value in SECRETS.items():
        assert name not in printed and value not in printed
