"""How `python -m mcpserver --http` and `mcpserver.run(server, "http")` serve MCP: the policy on top of
the generic HTTP server (mcpserver.httpd) and the WSGI app (mcpserver.http).

Rules of this module:
- Authentication is required off loopback: a static token (resolved by _app.resolve_token, as
  everywhere) or OAuth; without either the server refuses to start unless insecure_no_auth says
  something in front authenticates. OAuth off loopback also needs TLS or behind_proxy, and its
  resource URL must end with the endpoint path (else clients would look elsewhere).
- The limits: the app's (body size, listen streams per peer and per principal) and the server's
  (connections, requests, timeouts) are set here, once, from the same keyword arguments; the
  server's own body bound is the app's, so neither reads more than the other allows. The Server's
  bound on listen streams for the whole process must leave connections for everyone else.
- One line on stderr says where it serves and how it authenticates; the test helpers and people
  read it.
"""

from __future__ import annotations

import sys

from .. import httpd
from .._server import Server
from .._wire import DEFAULT_GRACE_SECONDS
from ..errors import ConfigError
from . import _app
from ._app import McpApp, is_loopback, resolve_token

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Optional

    from ..auth import ResourceServer

__all__ = ["serve"]


def _check_oauth(oauth: ResourceServer, *, host: str, path: str, tls: bool, behind_proxy: bool) -> None:
    if not (tls or behind_proxy or is_loopback(host)):
        raise ConfigError(f"refusing OAuth on {host} over plain HTTP: tokens would cross the network in clear. "
                          "Give --tls-cert and --tls-key, or --behind-proxy if a proxy in front terminates TLS")
    from urllib.parse import urlsplit

    if not behind_proxy and (urlsplit(oauth.resource).path or "/") != path:
        raise ConfigError(f"the resource {oauth.resource} does not end with the endpoint path {path}: clients "
                          "would look for the server and its metadata elsewhere (if a proxy in front rewrites "
                          "paths, say --behind-proxy)")


def _bound_listeners(server: Server, max_listeners: Optional[int], max_connections: int) -> None:
    """The process-wide bound on listen streams: `max_listeners`, else the Server's own, at most half the
    connections unless asked for explicitly (and never all of them): requests need connections too."""
    if max_listeners is None:
        server.subscriptions.limit = min(server.subscriptions.limit, max(1, max_connections // 2))
        return
    if not 0 < max_listeners < max_connections:
        raise ConfigError(f"max_listeners must be at least 1 and fewer than the {max_connections} connections, "
                          f"not {max_listeners!r}: listen streams must leave connections for requests")
    server.subscriptions.limit = max_listeners


def serve(server: Server, *, host: str = "127.0.0.1", port: int = 3000, path: str = "/mcp",
          token: Optional[str] = None, token_file: Optional[str] = None, insecure_no_auth: bool = False,
          allowed_origins: Iterable[str] = (), allowed_hosts: Iterable[str] = (),
          max_body_bytes: int = _app.DEFAULT_MAX_BODY_BYTES, oauth: Optional[ResourceServer] = None,
          behind_proxy: bool = False, tls_cert: Optional[str] = None, tls_key: Optional[str] = None,
          max_connections: int = httpd.DEFAULT_MAX_CONNECTIONS, max_requests: int = httpd.DEFAULT_MAX_REQUESTS,
          max_queued: int = httpd.DEFAULT_MAX_QUEUED, read_timeout: float = httpd.DEFAULT_READ_TIMEOUT,
          header_timeout: float = httpd.DEFAULT_HEADER_TIMEOUT, grace_seconds: float = DEFAULT_GRACE_SECONDS,
          max_listeners: Optional[int] = None, max_listeners_per_peer: int = _app.DEFAULT_MAX_LISTENERS_PER_PEER,
          max_listeners_per_principal: int = _app.DEFAULT_MAX_LISTENERS_PER_PRINCIPAL, metrics: bool = False,
          public_metrics: bool = False, health: bool = False, log_health: bool = False,
          rate_limit: Optional[str] = None, burst: Optional[int] = None,
          worker_idle_seconds: float = httpd.DEFAULT_IDLE_SECONDS) -> int:
    """Serve `server` over Streamable HTTP until SIGTERM/SIGINT; return the exit status (0).

    The token is _app.resolve_token's (`token`, `token_file`, $MCPSERVER_TOKEN_FILE, $MCPSERVER_TOKEN);
    `oauth` (an mcpserver.auth.ResourceServer) takes OAuth access tokens instead. `max_listeners`
    replaces the Server's own bound on subscriptions/listen streams for this process.
    """
    if oauth is None:
        token = resolve_token(token, token_file)
    loopback = is_loopback(host)
    if oauth is not None:
        _check_oauth(oauth, host=host, path=path, tls=bool(tls_cert), behind_proxy=behind_proxy)
    elif not loopback and not token and not insecure_no_auth:
        raise ConfigError(f"refusing to listen on {host} without authentication: pass --token-file (or set "
                          f"{_app.TOKEN_ENVIRONMENT}), or --insecure-no-auth if something in front authenticates")
    _bound_listeners(server, max_listeners, max_connections)
    app = McpApp(server, path=path, token=token, allowed_origins=allowed_origins,
                 allowed_hosts=list(allowed_hosts) or None, loopback=loopback, insecure_no_auth=insecure_no_auth,
                 max_body_bytes=max_body_bytes, oauth=oauth, behind_proxy=behind_proxy,
                 max_listeners_per_peer=max_listeners_per_peer,
                 max_listeners_per_principal=max_listeners_per_principal, metrics=metrics,
                 public_metrics=public_metrics, health=health, log_health=log_health, rate_limit=rate_limit,
                 burst=burst)
    auth = (f"OAuth for {oauth.resource}" if oauth is not None else "bearer token required" if token else
            "WARNING: no authentication (--insecure-no-auth)" if not loopback else "loopback only, no token")
    scheme = "https" if tls_cert else "http"

    def banner(bound_host: str, bound_port: int) -> None:
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(f"mcpserver: serving {server.name} {server.version} at {scheme}://{shown}:{bound_port}{path} ({auth})",
              file=sys.stderr, flush=True)

    return httpd.serve_app(app, host=host, port=port, banner=banner, max_connections=max_connections,
                            max_requests=max_requests, max_queued=max_queued, max_body_bytes=max_body_bytes,
                            read_timeout=read_timeout, header_timeout=header_timeout, grace_seconds=grace_seconds,
                            tls_cert=tls_cert, tls_key=tls_key, worker_idle_seconds=worker_idle_seconds)
