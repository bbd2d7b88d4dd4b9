"""How `python -m mcpserver --http` and `mcpserver.run(server, "http")` serve MCP: the policy on top of
the generic HTTP server (mcpserver.httpd) and the WSGI app (mcpserver.http).

Rules of this module:
- Authentication is required off loopback: a static token (resolved by _app.resolve_token, as
  everywhere) or OAuth; without either the server refuses to start unless insecure_no_auth says
  something in front authenticates. OAuth off loopback also needs TLS or behind_proxy, and its
  resource URL must end with the endpoint path (else clients would look elsewhere).
- The limits: the app's (body size, listen streams per peer and per principal) and the server's
  (connections, requests, timeouts) come from one HttpOptions, which both are given; the server's
  own body bound is the app's, so neither reads more than the other allows. The Server's bound on
  listen streams for the whole process must leave connections for everyone else.
- A Unix socket's peers are this host's, admitted by the socket file's mode (0600: this user alone): it is served
  as loopback is (no token needed; Host and Origin checked as on loopback, for a proxy in front).
- One line on stderr says where it serves and how it authenticates; the test helpers and people
  read it.
"""

from __future__ import annotations

import sys

from .. import httpd
from .._options import replace
from .._server import Server
from ..errors import ConfigError
from ._app import TOKEN_ENVIRONMENT, McpApp, is_loopback, resolve_token
from ._options import given

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from ..auth import ResourceServer
    from ._options import HttpOptions

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


def serve(server: Server, options: Optional[HttpOptions] = None, **keywords: Any) -> int:
    """Serve `server` over Streamable HTTP until SIGTERM/SIGINT; return the exit status (0). `options` are
    HttpOptions, or give their names as keywords.

    The token is _app.resolve_token's (`token`, `token_file`, $MCPSERVER_TOKEN_FILE, $MCPSERVER_TOKEN);
    `oauth` (an mcpserver.auth.ResourceServer) takes OAuth access tokens instead. `max_listeners`
    replaces the Server's own bound on subscriptions/listen streams for this process.
    """
    options = given(options, keywords)
    token = resolve_token(options.token, options.token_file) if options.oauth is None else None
    loopback = options.unix_socket is not None or is_loopback(options.host)  # a Unix socket's peers are this host's
    if options.oauth is not None:
        _check_oauth(options.oauth, host="localhost" if loopback else options.host, path=options.path,
                     tls=bool(options.tls_cert), behind_proxy=options.behind_proxy)
    elif not loopback and not token and not options.insecure_no_auth:
        raise ConfigError(f"refusing to listen on {options.host} without authentication: pass --token-file (or set "
                          f"{TOKEN_ENVIRONMENT}), or --insecure-no-auth if something in front authenticates")
    _bound_listeners(server, options.max_listeners, options.max_connections)
    options = replace(options, token=token, token_file=None, loopback=loopback)
    app = McpApp(server, options)
    auth = (f"OAuth for {options.oauth.resource}" if options.oauth is not None else "bearer token required" if token
            else "WARNING: no authentication (--insecure-no-auth)" if not loopback else "loopback only, no token")
    scheme = "https" if options.tls_cert else "http"

    def banner(bound_host: str, bound_port: int) -> None:
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        where = (f"unix:{bound_host} ({scheme}://localhost{options.path} on it)" if options.unix_socket is not None
                 else f"{scheme}://{shown}:{bound_port}{options.path}")
        print(f"mcpserver: serving {server.name} {server.version} at {where} ({auth})", file=sys.stderr, flush=True)

    return httpd.serve_app(app, options, banner=banner)
