"""The demo server: the smallest useful tools, and the ones the lab's payload checks lean on.

    python -m mcpserver server/examples/demo.py             # stdio
    python -m mcpserver --http server/examples/demo.py      # http://127.0.0.1:3000/mcp
"""

from mcpserver import Server, ToolError

server = Server("demo", "1.0.0", instructions="Tools for trying an MCP client: echo text, add numbers, "
                                              "or ask for a large text to test transports.")


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def echo(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: Any text; it comes back exactly as sent.
    """
    return text


@server.tool(output_schema={"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]},
             annotations={"readOnlyHint": True, "openWorldHint": False})
def add(a: float, b: float) -> dict:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    try:
        total = a + b  # two integers stay exact, however large
    except OverflowError:  # an integer past 1e308 plus a fraction
        raise ToolError("the sum is too large for a floating-point number") from None
    if isinstance(total, float) and total.is_integer() and abs(total) < 2**53:
        total = int(total)  # 2.0 + 3.0 is 5, as a person would write it
    return {"sum": total}


@server.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def big(size: int = 500_000) -> str:
    """Return a text of `size` "x" characters, to test how a client copes with large results.

    Args:
        size: How many characters, from 0 to 50,000,000.
    """
    if not 0 <= size <= 50_000_000:
        from mcpserver import ToolError

        raise ToolError(f"size must be between 0 and 50000000, not {size}")
    return "x" * size
