"""--log-format json: one JSON object per line, with the request id, principal and trace id of records made while a
request is answered, whether a record goes through `logging` (the server's code uses it) or, without it, through
mcpserver._log alone (which still never imports logging)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from mcptest import ROOT, StdioServer, call

TRACED = os.path.join(ROOT, "tests", "traced_tools.py")
UNTRACED = os.path.join(ROOT, "tests", "untraced_tools.py")
TRACE = "0af7651916cd43dd8448eb211c80319c"


def records(stderr):
    lines = [line for line in stderr.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every line is one object: a line that is not fails here


def test_without_logging_each_record_is_a_json_line_and_a_failing_calls_carries_its_request():
    with StdioServer(UNTRACED, "--log-format", "json") as server:
        assert server.ask(call("fails", id="req-1"))["result"]["isError"] is True
        answer = server.ask(call("loaded", id=2))["result"]["structuredContent"]
        server.close()
    assert answer == {"loaded": [], "logging": False}
    logged = records(server.stderr)
    assert {"time", "level", "logger", "message"} <= set(logged[0]) and logged[0]["level"] == "INFO"
    assert logged[0]["time"].endswith("Z") and "request_id" not in logged[0]  # start-up: no request
    (failure,) = [record for record in logged if record["level"] == "ERROR"]
    assert failure["request_id"] == "req-1" and failure["logger"] == "mcpserver.tools"
    assert failure["exception"].startswith("Traceback") and "ValueError: as planned" in failure["exception"]


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry") is None, reason="OpenTelemetry is in the test extra only")
def test_through_logging_a_tools_record_carries_the_request_id_and_its_trace_id():
    with StdioServer(TRACED, "--log-format", "json") as server:
        message = call("noisy", id=9)
        message["params"]["_meta"]["traceparent"] = f"00-{TRACE}-b7ad6b7169203331-01"
        assert server.ask(message)["result"]["content"][0]["text"] == "said so"
        server.close()
    (noisy,) = [record for record in records(server.stderr) if record["message"] == "noisy was called"]
    assert noisy == {"time": noisy["time"], "level": "WARNING", "logger": "traced_tools",
                     "message": "noisy was called", "request_id": 9, "trace_id": TRACE}


SCRIPT = """
import logging
from mcpserver import Server, _log
from mcpserver.auth import Principal
from mcpserver.testing import Client

_log.configure("info", None, "json")   # what --log-format json does
server = Server("who", "1.0.0")
server.middleware(_log.in_request, outermost=True)

@server.tool()
def whoami() -> str:
    logging.getLogger("who").info("asked")
    return "you"

_log.adopt_logging()
with Client(server, principal=Principal(subject="alice", client_id="app")) as client:
    client.call_tool("whoami", {})
"""


def test_a_record_names_the_oauth_principal_of_its_request():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    (asked,) = [record for record in records(done.stderr) if record["message"] == "asked"]
    assert asked["principal"] == "alice" and asked["logger"] == "who" and "request_id" in asked


def test_text_stays_the_default_and_an_unknown_format_is_a_usage_error():
    with StdioServer(UNTRACED) as server:
        server.ask(call("fails", id=1))
        server.close()
    assert server.stderr.split(" ", 2)[1].count(":") == 2  # "2026-12-01 23:35:05,594 INFO ...": the time of day
    done = subprocess.run([sys.executable, "-m", "mcpserver", "--log-format", "yaml", UNTRACED], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "server")})
    assert done.returncode == 2 and "invalid choice: 'yaml'" in done.stderr
