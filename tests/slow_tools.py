"""A server whose tools misbehave on purpose, for the stdio and HTTP transport tests.

`slow` says on stderr when it starts, so a test can signal the server mid-call on evidence, not on a
guess by sleeping; `chatty` prints to stdout every way a tool can; `pid` tells worker processes apart.
"""

import os
import subprocess
import sys
import time

from mcpserver import Context, Server

server = Server("slow-tools")


@server.tool()
def slow(seconds: float) -> str:
    sys.stderr.write("slow: started\n")
    sys.stderr.flush()
    time.sleep(seconds)
    return "slept"


@server.tool()
def held(path: str, ctx: Context) -> str:
    """Run until `path` exists (at most 120 s): a call that ends when the test says, never by a clock."""
    sys.stderr.write("held: started\n")
    sys.stderr.flush()
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return "never released"
        ctx.sleep(0.01)
    return "released"


@server.tool()
def chatty(text: str) -> str:
    print("python print to stdout")
    sys.stdout.write("partial line without newline")
    os.write(1, b"raw write to fd 1\n")
    subprocess.run(["echo", "child process output"], check=True)
    return text


@server.tool()
def pid() -> str:
    return str(os.getpid())


@server.tool()
def slow_pid(seconds: float) -> str:
    time.sleep(seconds)
    return str(os.getpid())


@server.tool()
def ticker(seconds: float, path: str, ctx: Context) -> str:
    """Append a line to `path` every 10 ms for `seconds`, reporting each as progress: the side effect
    shows when a cancel stopped it."""
    deadline = time.monotonic() + seconds
    sys.stderr.write("ticker: started\n")
    sys.stderr.flush()
    count = 0
    try:
        while time.monotonic() < deadline:
            with open(path, "a") as file:
                file.write("tick\n")
            count += 1
            ctx.progress(count)
            ctx.sleep(0.01)
    finally:  # evidence for a test that the loop is over, however it ended
        sys.stderr.write("ticker: stopped\n")
        sys.stderr.flush()
    return "ticked"


@server.tool()
def steps(count: int, ctx: Context, pause: float = 0.0) -> str:
    """Report `count` progress steps, then answer."""
    for step in range(1, count + 1):
        ctx.progress(step, count, f"step {step}")
        if pause:
            ctx.sleep(pause)
    return f"{count} steps"


@server.tool()
def deaf(seconds: float) -> str:
    """Sleep without a context: it cannot see a cancel, but its answer must still never be sent."""
    sys.stderr.write("deaf: started\n")
    sys.stderr.flush()
    time.sleep(seconds)
    return "finished anyway"


_PIDFILE = {"type": "object", "properties": {"pidfile": {"type": "string", "maxLength": 4096}}, "required": ["pidfile"]}
server.command("slow_command", [
    "sh", "-c", 'echo $$ > "$1"; i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo "$i/600" >&2; sleep 0.05; done',
    "sh", "{pidfile}"], input_schema=_PIDFILE, stdin="none", timeout=60, progress=r"(\d+)/(\d+)")
