"""What `make soak` serves: the demo's tools (echo for 500 KB payloads up, big for 5 MB down) and the
long-running example's (count reports progress and stops when cancelled; countdown is a command tool),
plus what the held listen streams and the task load need: a resource that `tick` says has changed,
and a task tool."""

import itertools
import os

from mcpserver import Context, Server
from mcpserver._loader import load_target

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "server", "examples")
TICK_URI = "soak://tick"

server = Server("soak", "1.0.0")
for _example in ("demo.py", "long_running.py"):
    for _tool in load_target(os.path.join(EXAMPLES, _example)).tools.values():
        server.add_tool(_tool)

_ticks = itertools.count(1)


@server.resource(TICK_URI, mime_type="text/plain")
def tick_resource() -> str:
    """What the held subscriptions/listen streams subscribe to."""
    return "tick"


@server.tool()
def tick() -> str:
    """Tell every listener subscribed to soak://tick that it changed (the soak counts what reaches them)."""
    server.resource_updated(TICK_URI)
    return f"tick {next(_ticks)}"


@server.tool(task="optional")
def soak_task(n: int, ms: int, ctx: Context) -> str:
    """A task when the extension is declared: runs `ms` milliseconds, then answers with `n`."""
    ctx.start_task()
    ctx.sleep(ms / 1000)
    return f"task {n} done"
