"""Which transport serves a Server: the one choice above both transports (the registry knows none)."""

from __future__ import annotations

import sys

from ._server import Server

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal, Optional, overload

    from .http import HttpOptions
else:
    def overload(function: Any) -> Any:  # what typing.overload does at run time: the last definition wins
        return function

__all__ = ["run"]


@overload
def run(server: Server, transport: Literal["stdio"] = "stdio", *, max_concurrent: int = ...,
        grace_seconds: float = ...) -> int: ...


@overload  # ruff sees the run-time stand-in, not typing.overload: hence the noqa on the redefinitions
def run(server: Server, transport: Literal["http"], options: Optional[HttpOptions] = ...,  # noqa: F811
        **keywords: Any) -> int: ...


def run(server: Server, transport: str = "stdio", options: Any = None, **keywords: Any) -> int:  # noqa: F811
    """Serve `server` until EOF or a signal; return the exit status.

    `transport` is "stdio" (what MCP clients launch; options max_concurrent, grace_seconds) or
    "http" (Streamable HTTP): `options` is an mcpserver.http.HttpOptions, whose fields are
    `python -m mcpserver --http`'s options (host, port, path, token, oauth, max_connections, rate_limit...),
    and the same names are taken as keywords too (docs/guides/security.md's table gives their defaults):

        sys.exit(mcpserver.run(server, "http", HttpOptions(port=8080, rate_limit="10/s")))
        sys.exit(mcpserver.run(server, "http", port=8080, rate_limit="10/s"))
    """
    if sys.implementation.name == "pypy":  # CPython starts without importing what only PyPy needs
        from ._pypy import warn_if_oversized

        warn_if_oversized("mcpserver.run")
    if server.task_store is not None:  # refused now if it cannot serve; and this server's changes reach the bus
        from .store import shared

        shared(server)
    if transport == "stdio":
        from .stdio import serve_stdio

        if options is not None:
            raise TypeError("stdio takes its options as keywords: max_concurrent, grace_seconds")
        return serve_stdio(server, **keywords)
    if transport == "http":
        from .http._serving import serve

        return serve(server, options, **keywords)
    raise ValueError(f"unknown transport {transport!r}; use \"stdio\" or \"http\"")
