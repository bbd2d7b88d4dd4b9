"""Streamable HTTP: the WSGI app for a Server, and how the project's own HTTP/1.1 server (mcpserver.httpd) serves it.

    gunicorn -w 4 'mcpserver.http:create_app("server/examples/demo.py")'

The wing, by role:
  _options   HttpOptions: every option of serving MCP over HTTP, named once (mcpserver.httpd.ServeOptions and the app's)
  _response  Response and Refused: what the app answers with; Admitted: what the checks on a head let through
  _stream    a request answered as server-sent events (progress, subscriptions/listen, a session's GET)
  _cors      CORS for the origins --allow-origin names: preflights, and the headers of every answer to them
  _card      the Server Card (SEP-2127, a draft: experimental) at <path>/server-card, and the AI Catalog
  _sessions  the legacy era's sessions over HTTP (Mcp-Session-Id, the GET stream, DELETE)
  _app       McpApp, the WSGI app (WIRE.md §16): the checks on a request's head, then the core
  _serving   `python -m mcpserver --http`: the app on the server, with authentication, TLS and limits
"""

from ._app import McpApp, create_app, is_loopback, read_token_file, resolve_token
from ._options import (
           DEFAULT_MAX_BODY_BYTES,
           DEFAULT_MAX_LISTENERS_PER_PEER,
           DEFAULT_MAX_LISTENERS_PER_PRINCIPAL,
           HttpOptions,
)
from ._response import Refused, Response

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_LISTENERS_PER_PEER", "DEFAULT_MAX_LISTENERS_PER_PRINCIPAL",
           "HttpOptions", "McpApp", "Refused", "Response", "create_app", "is_loopback", "read_token_file",
           "resolve_token"]
