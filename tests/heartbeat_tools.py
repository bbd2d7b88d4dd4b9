"""Tools with progress heartbeats, for tests/unit/test_heartbeat.py and tests/http/test_http_heartbeat.py. They
beat as often as the SDK allows, so a test hears several beats in a fraction of a second; the tests count and
order what they hear, and never time it.
"""

import sys
import time

from mcpserver import Context, Server

BEAT = 0.05  # seconds: the least a heartbeat may be (mcpserver._tools.MIN_HEARTBEAT)

server = Server("heartbeats", "1.0.0")


@server.tool(heartbeat=BEAT)
def silent(seconds: float) -> str:
    """Says nothing for `seconds` (and takes no Context: it beats all the same)."""
    time.sleep(seconds)
    return "done"


@server.tool(heartbeat=BEAT)
def reports(steps: int, pause: float, ctx: Context) -> str:
    """Its own progress, `pause` seconds apart: beats in between."""
    for step in range(steps):
        ctx.progress(step, steps, f"step {step}")
        ctx.sleep(pause)
    return "reported"


@server.tool(heartbeat=BEAT)
def late(ctx: Context) -> str:
    """Silent a while, then reports from 0: beats have already gone past its first values."""
    time.sleep(BEAT * 6)
    ctx.progress(0, 2, "first")
    ctx.progress(1e-320, 2, "second")  # a tool may count in steps as small as it likes
    ctx.progress(1, 2, "third")
    return "late"


@server.tool(heartbeat=BEAT)
def chatty(count: int, ctx: Context) -> str:
    """Its own progress as fast as it can, with short pauses: its values race the beats."""
    for n in range(count):
        ctx.progress(n, message=f"n={n}")
        if n % 50 == 49:
            time.sleep(BEAT / 4)
    return "chatted"


@server.tool(heartbeat=BEAT)
def waits(ctx: Context) -> str:
    """Until cancelled (at most a minute)."""
    ctx.sleep(60)
    return "not cancelled"


@server.tool()
def plain(seconds: float) -> str:
    """No heartbeat."""
    time.sleep(seconds)
    return "plain"


@server.tool(heartbeat=BEAT, task="optional")
def as_task(seconds: float, ctx: Context) -> str:
    """Beats while the call is still the request, then becomes a task (when the client declared the extension)."""
    ctx.sleep(0.3)
    ctx.start_task()
    ctx.sleep(seconds)
    return "task done"


server.command("sleeper", [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))", "{seconds}"],
               input_schema={"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0,
                                                                         "maximum": 10}},
                             "required": ["seconds"], "additionalProperties": False},
               stdin="none", heartbeat=BEAT)
