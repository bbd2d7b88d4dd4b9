"""A small MCP server to start from: two tools, typed and described for the model.

    mcpserver call server.py add '{"a": 2, "b": 3}'
    python -m mcpserver server.py            # stdio
    python -m mcpserver --http server.py     # http://127.0.0.1:3000/mcp
"""

from typing import Literal

from mcpserver import Server, ToolError

server = Server("starter", "1.0.0", instructions="Arithmetic and unit conversion.")


@server.tool(annotations={"readOnlyHint": True})
def add(a: float, b: float) -> dict:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return {"sum": a + b}


@server.tool(annotations={"readOnlyHint": True})
def convert(value: float, unit: Literal["km", "mi"]) -> str:
    """Convert a distance between kilometres and miles.

    Args:
        value: The distance, zero or more.
        unit: The unit the value is in; the answer is in the other one.
    """
    if value < 0:
        raise ToolError("a distance is zero or more")
    return f"{value * 0.621371:.3f} mi" if unit == "km" else f"{value / 0.621371:.3f} km"
