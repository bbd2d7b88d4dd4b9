"""Which transport serves a Server: the one choice above both transports (the registry knows none)."""

from __future__ import annotations

from ._server import Server

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any

__all__ = ["run"]


def run(server: Server, transport: str = "stdio", **options: Any) -> int:
    """Serve `server` until EOF or a signal; return the exit status.

    `transport` is "stdio" (what MCP clients launch) or "http" (options: those of mcpserver._httpd.serve,
    e.g. host, port, path, token_file, insecure_no_auth, allowed_origins, allowed_hosts, max_body_bytes,
    max_connections, read_timeout, header_timeout, grace_seconds).

        if __name__ == "__main__":
            sys.exit(mcpserver.run(server))
    """
    if transport == "stdio":
        from .stdio import serve_stdio

        return serve_stdio(server, **options)
    if transport == "http":
        from ._httpd import serve

        return serve(server, **options)
    raise ValueError(f"unknown transport {transport!r}; use \"stdio\" or \"http\"")
