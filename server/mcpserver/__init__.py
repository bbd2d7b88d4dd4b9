"""mcpserver: a Model Context Protocol server SDK (protocol 2026-07-28, and the initialize-based
revisions 2025-11-25 down to 2024-11-05) in pure standard library.

    from mcpserver import Server

    server = Server("demo", "1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        '''Return the text unchanged.'''
        return text

Serve it with `python -m mcpserver demo.py` (stdio) or `python -m mcpserver --http demo.py`.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers see; at run time each name is imported when first asked for
    from . import content, inputs
    from ._context import Call, Cancelled, Context
    from ._loader import load_target
    from ._middleware import Middleware
    from ._prompts import Prompt
    from ._ratelimit import ToolRateLimits
    from ._resources import Resource, ResourceNotFound, ResourceTemplate
    from ._run import run
    from ._server import Server
    from ._tools import Tool, ToolError, ToolResult
    from ._version import __version__
    from ._wire import PROTOCOL_VERSION
    from .errors import ConfigError, ProtocolError

__all__ = [
    "PROTOCOL_VERSION",
    "Call",
    "Cancelled",
    "ConfigError",
    "Context",
    "Middleware",
    "Prompt",
    "ProtocolError",
    "Resource",
    "ResourceNotFound",
    "ResourceTemplate",
    "Server",
    "Tool",
    "ToolError",
    "ToolRateLimits",
    "ToolResult",
    "__version__",
    "content",
    "inputs",
    "load_target",
    "run",
]

# Where each public name lives (None: a submodule). `import mcpserver` imports none of them, so the command
# line (python -m mcpserver) starts before the registry and the core are imported, and decides how.
_HOMES = {
    "PROTOCOL_VERSION": "._wire", "Call": "._context", "Cancelled": "._context", "ConfigError": ".errors",
    "Context": "._context", "Middleware": "._middleware", "Prompt": "._prompts", "ProtocolError": ".errors",
    "Resource": "._resources",
    "ResourceNotFound": "._resources", "ResourceTemplate": "._resources", "Server": "._server", "Tool": "._tools",
    "ToolError": "._tools", "ToolRateLimits": "._ratelimit", "ToolResult": "._tools", "__version__": "._version",
    "content": None, "inputs": None, "load_target": "._loader", "run": "._run",
}


def __getattr__(name: str) -> object:  # PEP 562: a public name, imported on first use, then kept
    if name not in _HOMES:
        raise AttributeError(f"module 'mcpserver' has no attribute {name!r}")
    from importlib import import_module

    home = _HOMES[name]
    value = import_module("." + name, __name__) if home is None else getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
