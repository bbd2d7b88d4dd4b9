"""What a client can learn that it should not: the server's secrets in a command tool's environment, and
the detail of failures (an exception's message, a program's stderr) when the operator asked to keep it in
the log (MCPSERVER_GENERIC_ERRORS=1 or --generic-errors)."""

import os
import re

import pytest
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


@pytest.mark.parametrize("tool", ["leaky_raise", "leaky_command"])
@pytest.mark.parametrize("how", ["environment", "flag"])
def test_generic_errors_keep_the_detail_in_the_log_under_an_id(tool, how):
    options, env = (("--generic-errors",), None) if how == "flag" else ((), {"MCPSERVER_GENERIC_ERRORS": "1"})
    with StdioServer(TOOLS, *options, env=env) as server:
        answer = server.ask(call(tool))
        assert answer["result"]["isError"] is True
        told = text(answer)
        assert "hunter2" not in told and "/srv/" not in told and "postgres" not in told
        incident = re.search(r"\berror ([0-9a-f]{8})\b", told)
        assert incident, told
        server.wait_for_stderr(incident.group(1))
        logged = [line for line in server.stderr.splitlines() if incident.group(1) in line]
    assert "hunter2" in logged[0]  # the operator's log has what the client was not told


@pytest.mark.parametrize("tool", ["leaky_raise", "leaky_command"])
def test_by_default_the_detail_goes_to_the_client_for_the_model_to_act_on(tool):
    with StdioServer(TOOLS) as server:
        answer = server.ask(call(tool))
    assert answer["result"]["isError"] is True and "hunter2" in text(answer)
