"""Long-running tools: progress a client can show, and cancellation that really stops the work.

    python -m mcpserver server/examples/long_running.py            # stdio
    python -m mcpserver --http server/examples/long_running.py     # progress arrives over SSE

A client that sends `_meta.progressToken` with its call gets `notifications/progress`; one that cancels
(notifications/cancelled on stdio, closing the stream over HTTP) stops the tool and gets nothing more.
"""

from mcpserver import Context, Server, ToolError

server = Server("long-running", "1.0.0", instructions="Tools that take a while: count slowly, or run a slow "
                                                      "program. Both report progress and can be cancelled.")


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def count(to: int, ctx: Context, delay: float = 0.1) -> str:
    """Count from 1 to `to`, one number every `delay` seconds, reporting progress as it goes.

    Args:
        to: How far to count, from 1 to 100,000.
        delay: Seconds between numbers, from 0 to 10.
    """
    if not 1 <= to <= 100_000 or not 0 <= delay <= 10:
        raise ToolError("to must be 1 to 100000 and delay 0 to 10")
    for number in range(1, to + 1):
        ctx.sleep(delay)  # returns early, raising Cancelled, if the call is cancelled
        ctx.progress(number, to, f"counted to {number}")  # also raises Cancelled once cancelled
    return f"counted to {to}"


# A program that knows nothing of MCP: its "i/n" lines on stderr become progress notifications.
server.command(
    "countdown", ["sh", "-c", 'i=0; while [ "$i" -lt "$1" ]; do i=$((i + 1)); echo "$i/$1" >&2; sleep 0.1; done; '
                  'echo "liftoff after $1"', "sh", "{seconds}"],
    description="Count down for `seconds` tenths of a second, then say liftoff (a slow shell loop).",
    input_schema={"type": "object", "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": 600}},
                  "required": ["seconds"], "additionalProperties": False},
    stdin="none", timeout=120, progress=r"(\d+)/(\d+)",
    annotations={"readOnlyHint": True, "openWorldHint": False})
