"""Which transport serves a Server: the one choice above both transports (the registry knows none)."""

from __future__ import annotations

import sys

from ._server import Server

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Literal, Optional, overload

    from .auth import ResourceServer
else:
    def overload(function: Any) -> Any:  # what typing.overload does at run time: the last definition wins
        return function

__all__ = ["run"]


@overload
def run(server: Server, transport: Literal["stdio"] = "stdio", *, max_concurrent: int = ...,
        grace_seconds: float = ...) -> int: ...


@overload  # ruff sees the run-time stand-in, not typing.overload: hence the noqa on the redefinitions
def run(server: Server, transport: Literal["http"], *, host: str = ..., port: int = ..., path: str = ...,  # noqa: F811
        token: Optional[str] = ..., token_file: Optional[str] = ..., insecure_no_auth: bool = ...,
        allowed_origins: Iterable[str] = ..., allowed_hosts: Iterable[str] = ..., max_body_bytes: int = ...,
        oauth: Optional[ResourceServer] = ..., behind_proxy: bool = ..., tls_cert: Optional[str] = ...,
        tls_key: Optional[str] = ..., max_connections: int = ..., max_requests: int = ..., max_queued: int = ...,
        read_timeout: float = ..., header_timeout: float = ..., grace_seconds: float = ...,
        max_listeners: Optional[int] = ..., max_listeners_per_peer: int = ...,
        max_listeners_per_principal: int = ..., metrics: bool = ..., public_metrics: bool = ...,
        health: bool = ..., log_health: bool = ..., rate_limit: Optional[str] = ...,
        burst: Optional[int] = ..., worker_idle_seconds: float = ...) -> int: ...


def run(server: Server, transport: str = "stdio", **options: Any) -> int:  # noqa: F811
    """Serve `server` until EOF or a signal; return the exit status.

    `transport` is "stdio" (what MCP clients launch; options max_concurrent, grace_seconds) or
    "http" (Streamable HTTP; the options are `python -m mcpserver --http`'s, spelled as keywords:
    host, port, path, token, token_file, insecure_no_auth, allowed_origins, allowed_hosts,
    max_body_bytes, oauth (an mcpserver.auth.ResourceServer), behind_proxy, tls_cert, tls_key,
    max_connections, max_requests, max_queued, read_timeout, header_timeout, grace_seconds,
    max_listeners, max_listeners_per_peer, max_listeners_per_principal, metrics, public_metrics, health,
    log_health, rate_limit, burst, worker_idle_seconds; README.md's security table gives their defaults).

        if __name__ == "__main__":
            sys.exit(mcpserver.run(server))
    """
    if sys.implementation.name == "pypy":  # CPython starts without importing what only PyPy needs
        from ._pypy import warn_if_oversized

        warn_if_oversized("mcpserver.run")
    if server.task_store is not None:  # refused now if it cannot serve; and this server's changes reach the bus
        from .store import shared

        shared(server)
    if transport == "stdio":
        from .stdio import serve_stdio

        return serve_stdio(server, **options)
    if transport == "http":
        from .http._serving import serve

        return serve(server, **options)
    raise ValueError(f"unknown transport {transport!r}; use \"stdio\" or \"http\"")
