"""The demo's tools plus the diagnostic hooks the official conformance suite probes.

`make conformance` serves this over HTTP and runs the suite's scenarios against it. The hooks are
test fixtures named as the suite expects; keep them out of servers you ship.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from demo import server as demo
from mcpserver import Context, Server

server = Server("demo-conformance", demo.version, instructions=demo.instructions)
for tool in demo.tools.values():
    server.add_tool(tool)


@server.tool(requires_client_capabilities={"sampling": {}})
def test_missing_capability() -> str:
    """Needs the client's sampling capability: without it the server answers -32021."""
    return "the client declared sampling"


@server.tool(requires_client_capabilities={"elicitation": {}})
def test_streaming_elicitation() -> str:
    """Needs elicitation; answers on its own response and never sends the client a request."""
    return "the client declared elicitation"


@server.tool()
def test_logging_tool() -> str:
    """Logs to the server's stderr only: no notifications/message without _meta logLevel."""
    import logging

    logging.getLogger("mcpserver.examples").info("test_logging_tool ran")
    return "logged to stderr"


@server.tool()
def test_tool_with_progress(ctx: Context) -> str:
    """Reports 0, 50 and 100 of 100, 50 ms apart, when the client asked for progress."""
    for done in (0, 50, 100):
        ctx.progress(done, 100)
        if done < 100:
            ctx.sleep(0.05)
    return "progress reported"
