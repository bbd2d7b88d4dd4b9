"""Tools for the bus tests: a resource that changes when told, a tool list that grows when told, and a task."""

import os

from mcpserver import Context, Server

server = Server("bus", "1.0.0", offers=["resources", "tools"])


@server.resource_template("res://{name}")
def res(name: str) -> str:
    """A resource for every name."""
    return name


@server.tool()
def touch(uri: str) -> str:
    """Say that `uri` changed."""
    server.resource_updated(uri)
    return f"touched {uri}"


@server.tool()
def grow(name: str) -> str:
    """Add a tool named `name` (the tool list changes)."""
    server.tool(name=name)(lambda: name)
    return f"added {name}"


@server.tool()
def pid() -> str:
    """The serving process's id (which gunicorn worker a connection reached)."""
    return str(os.getpid())


@server.tool(task="optional")
def wait(seconds: float, ctx: Context) -> str:
    """A task that waits `seconds`."""
    ctx.start_task()
    ctx.sleep(seconds)
    return f"waited {seconds:g}"
