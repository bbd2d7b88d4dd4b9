"""The official Python SDK's server (PyPI mcp==2.3.0) with the same tools as server/examples/demo.py.

Runs from the benchmark's own environment (.cache/bench-venv), never from the project's:

    .cache/bench-venv/bin/python bench/sdk_server.py                 # stdio
    .cache/bench-venv/bin/python bench/sdk_server.py --http PORT     # uvicorn, stateless JSON responses
    .cache/bench-venv/bin/python bench/sdk_server.py --http-sessions PORT   # the same, with sessions

Over HTTP it is served the way the SDK documents for stateless deployments: its Starlette app
(stateless_http, json_response) under uvicorn, with uvicorn's access log off like every other
server in the benchmark. --http-sessions serves its stateful app instead (the SDK's default: an
Mcp-Session-Id minted at initialize, required after), for the legacy-era row: the way an
initialize-based client meets a server that keeps sessions, as mcpserver does for that era.
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdkdemo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def big(size: int = 500_000) -> str:
    """Return a text of `size` "x" characters."""
    return "x" * size


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report `count` progress steps (1 to count, of count), then answer: as bench/progress_server.py."""
    for step in range(1, count + 1):
        await ctx.report_progress(step, count)
    return f"{count} steps"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("--http", "--http-sessions"):
        import uvicorn

        app = server.streamable_http_app(stateless_http=sys.argv[1] == "--http", json_response=True)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
    else:
        server.run()


if __name__ == "__main__":
    main()
