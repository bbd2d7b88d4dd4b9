"""mcpserver: a Model Context Protocol server SDK (protocol 2026-07-28) in pure standard library.

    from mcpserver import Server

    server = Server("demo", "1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        '''Return the text unchanged.'''
        return text

Serve it with `python -m mcpserver demo.py` (stdio) or `python -m mcpserver --http demo.py`.
"""

from . import content, inputs
from ._context import Cancelled, Context
from ._loader import load_target
from ._prompts import Prompt
from ._resources import Resource, ResourceNotFound, ResourceTemplate
from ._run import run
from ._server import Server
from ._tools import Tool, ToolError, ToolResult
from ._version import __version__
from .errors import ConfigError, ProtocolError
from .protocol import PROTOCOL_VERSION, handle

__all__ = [
    "PROTOCOL_VERSION",
    "Cancelled",
    "ConfigError",
    "Context",
    "Prompt",
    "ProtocolError",
    "Resource",
    "ResourceNotFound",
    "ResourceTemplate",
    "Server",
    "Tool",
    "ToolError",
    "ToolResult",
    "__version__",
    "content",
    "handle",
    "inputs",
    "load_target",
    "run",
]
