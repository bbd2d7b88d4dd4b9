"""Tools a hostile client aims at, and tools that misbehave the way real ones do, for tests/hostile.

Served by `python -m mcpserver tests/hostile/hostile_tools.py` over stdio and HTTP.
"""

import asyncio
import os
import subprocess
import sys

from mcpserver import Server, ToolResult

server = Server("hostile-tools")

_RAISED = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit,
           "CancelledError": asyncio.CancelledError, "GeneratorExit": GeneratorExit,
           "BaseException": BaseException}


@server.tool()
def tags(tags: set[str]) -> int:
    """Count distinct tags (a set parameter: uniqueItems)."""
    return len(tags)


@server.tool(input_schema={"type": "object", "properties": {"items": {"type": "array", "uniqueItems": True}},
                           "required": ["items"]})
def unique_any(items: list) -> int:
    return len(items)


@server.tool(input_schema={"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}},
                           "required": ["n"]})
def halves(n: float) -> str:
    return str(n)


@server.tool()
def raise_base(kind: str) -> str:
    """Raise a BaseException that is not the server's own."""
    raise _RAISED[kind]()


@server.tool()
async def async_cancelled() -> str:
    raise asyncio.CancelledError()


@server.tool()
def read_stdin() -> str:
    """What a tool reading the process's stdin gets: never the protocol's next request."""
    return sys.stdin.readline()


@server.tool()
def child_reads_stdin() -> str:
    """A child started without stdin=DEVNULL, as many real tools start them."""
    print("child_reads_stdin: starting cat", file=sys.stderr, flush=True)
    return subprocess.run(["cat"], stdout=subprocess.PIPE, timeout=20, check=True).stdout.decode()


@server.tool()
def progress_bar(updates: int) -> str:
    """Draw a progress bar the way CLI libraries do: carriage returns, no newline."""
    for i in range(updates):
        print(f"\r{i}/{updates}", end="")
    print()
    return "drawn"


@server.tool()
def zombies() -> int:
    """How many zombie processes this process's PID namespace holds."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    count += stat.read().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                pass
    return count


_PIDFILE = {"type": "object", "properties": {"pidfile": {"type": "string", "maxLength": 4096}},
            "required": ["pidfile"], "additionalProperties": False}
# Each leaves a process behind that writes its pid to `pidfile` and sleeps. The timeout leaves the shells time to
# start, which takes seconds under emulation (MCPTEST_SLOWDOWN: the lab's emulated cells set it).
SLOWDOWN = float(os.environ.get("MCPTEST_SLOWDOWN") or 1)
server.command("orphans", ["sh", "-c", "sleep 60 & sleep 60 & wait"], stdin="none", timeout=0.3)
server.command("setsid_child", ["sh", "-c", 'setsid sh -c "echo \\$\\$ > $1; exec sleep 60" & sleep 60', "sh",
                                "{pidfile}"], input_schema=_PIDFILE, stdin="none", timeout=0.5 * SLOWDOWN)
# It waits until the daemon has written its pid, so the daemon has left the group before the run ends.
server.command("daemon", ["sh", "-c", 'setsid sh -c "echo \\$\\$ > $1; exec sleep 60" </dev/null >/dev/null 2>&1 & '
                          'until [ -s "$1" ]; do sleep 0.01; done', "sh", "{pidfile}"],
               input_schema=_PIDFILE, stdin="none", timeout=10)
server.command("lingering", ["sh", "-c", 'sleep 60 & echo "$$" > "$1"; echo done', "sh", "{pidfile}"],
               input_schema=_PIDFILE, stdin="none", timeout=20)
server.command("echo_number", ["echo", "{n}"], input_schema={
    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, stdin="none")
server.command("echo_option", ["echo", "--n={n}"], input_schema={
    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, stdin="none")
_TEXT = {"type": "object", "properties": {"text": {"type": "string", "maxLength": 100}}, "required": ["text"]}
server.command("echo_text", ["echo", "{text}"], input_schema=_TEXT, stdin="none")
server.command("raw_cat", ["cat"], input_schema=_TEXT, stdin={"argument": "text"})
server.command("json_cat", ["cat"], input_schema=_TEXT, output="json")
# What leaks when things go wrong: a program that prints its environment, one that fails with a secret on
# stderr, and a Python tool whose exception message carries one (tests/hostile/test_disclosure.py).
server.command("environment", ["env"], stdin="none")
server.command("leaky_command", ["sh", "-c", "echo 'cannot open /srv/app/credentials.json: password=hunter2' >&2; "
                                             "exit 3"], stdin="none")


@server.tool()
def leaky_raise() -> str:
    """Fail the way a database driver does: the connection string, password included, in the message."""
    raise RuntimeError("could not connect to postgres://admin:hunter2@db.internal:5432/prod")


@server.tool(input_schema={"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Cloud_Region"}}, "required": ["region"]})
def region_echo(region: str) -> str:
    """Mirror an argument into a header whose name has an underscore (a valid HTTP token)."""
    return region


@server.resource_template("repo://{+owner}/{+name}/{+path}")
def repo_file(owner: str, name: str, path: str) -> str:
    """Three reserved expansions in a row: a regular expression of them backtracks cubically."""
    return f"{owner} {name} {path}"


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@server.tool()
def returns(kind: str):
    """Return what JSON cannot carry: NaN as a structured value, a set, or nesting past the stack."""
    return {"structured_nan": lambda: ToolResult(content=[], structured={"x": float("nan")}),
            "structured_deep": lambda: ToolResult(content=[{"type": "text", "text": "deep"}],
                                                  structured=_nested(100_000)),
            "deep": lambda: _nested(100_000),
            "set": lambda: {"tags": {"a", "b"}}}[kind]()
