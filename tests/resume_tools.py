"""Tools for the resumption tests: a call that reports progress as it goes, and one that says a resource
changed as many times as asked (more than a session's event store keeps, when asked to)."""

from mcpserver import Context, Server

server = Server("resume", "1.0.0", offers=["resources"])


@server.resource_template("res://{name}")
def res(name: str) -> str:
    """A resource for every name."""
    return name


@server.tool()
def count(to: int, delay: float, ctx: Context) -> str:
    """Count to `to`, reporting each number, `delay` seconds apart."""
    for number in range(1, to + 1):
        ctx.progress(number, to)
        ctx.sleep(delay)
    return f"counted to {to}"


@server.tool()
def touch_each(uris: list[str]) -> str:
    """Say that each of `uris` changed, in order."""
    for uri in uris:
        server.resource_updated(uri)
    return f"touched {len(uris)}"


@server.tool()
def touch(uri: str, times: int = 1) -> str:
    """Say that `uri` changed, `times` times."""
    for _ in range(times):
        server.resource_updated(uri)
    return f"touched {uri} {times} times"
