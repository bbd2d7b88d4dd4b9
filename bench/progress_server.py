"""mcpserver with the tools the benchmark needs for requests in flight (issue 13), on the public API only.

    python -m mcpserver bench/progress_server.py            # stdio
    python -m mcpserver --http bench/progress_server.py     # HTTP; progress comes back as an SSE stream

`echo` and `echo_ctx` are the same tool, except that `echo_ctx` asks for the request's Context: the
benchmark divides one by the other to show what asking for a context costs. `steps` reports `count`
progress notifications as fast as it can (only when the request carried _meta.progressToken), then
answers. `held` runs until a file exists: the call that quick ones are measured beside.
"""

import os

from mcpserver import Context, Server

server = Server("bench-progress", "1.0.0")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def echo_ctx(text: str, ctx: Context) -> str:
    """Return the text unchanged; the same as echo, with the request's context asked for."""
    return text


@server.tool()
def steps(count: int, ctx: Context) -> str:
    """Report `count` progress steps (1 to count, of count), then answer."""
    for step in range(1, count + 1):
        ctx.progress(step, count)
    return f"{count} steps"


@server.tool()
def held(path: str, ctx: Context) -> str:
    """Run until `path` exists (at most 120 s)."""
    for _ in range(12000):
        if os.path.exists(path):
            return "released"
        ctx.sleep(0.01)
    return "never released"
