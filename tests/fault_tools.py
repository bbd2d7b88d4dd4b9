"""Tools for the fault tests (issue 50, item 4): a resource that changes when told, a task that waits, and a call
that reports progress as it goes."""

from mcpserver import Context, Server

server = Server("faults", "1.0.0", offers=["resources"])


@server.resource_template("res://{name}")
def res(name: str) -> str:
    """A resource for every name."""
    return name


@server.tool()
def touch(uri: str) -> str:
    """Say that `uri` changed."""
    server.resource_updated(uri)
    return f"touched {uri}"


@server.tool(task="optional")
def wait(seconds: float, ctx: Context) -> str:
    """A task that waits `seconds`."""
    ctx.start_task()
    ctx.sleep(seconds)
    return f"waited {seconds:g}"


@server.tool()
def count(to: int, delay: float, ctx: Context) -> str:
    """Count to `to`, reporting each number, `delay` seconds apart."""
    for number in range(1, to + 1):
        ctx.progress(number, to)
        ctx.sleep(delay)
    return f"counted to {to}"
