"""The built-in HTTP/1.1 server: any WSGI app, from one event loop and a bounded pool of workers. It knows no MCP
(mcpserver.http is the MCP app it serves; docs/adr/0004-our-own-http-server.md says why the server is ours).

The package, by role (each module's docstring states its rules):
  _head        a request head, parsed strictly (RFC 9112): no socket, no state
  _poller      readiness: epoll with EPOLLONESHOT, or poll() where there is none
  _connection  one client connection: its socket, its buffers, its state (which says who owns it)
  _accepting   the door: the listening socket, the bound on connections, TLS for new ones
  _loop        the loop thread: owns every connection not running a request, its moves and deadlines
  _reading     a request coming in: handshake, head, body (on the loop; briefly on a worker)
  _writing     a response going out: what the socket takes now, the rest by the loop; what comes after it
  _pushing     push streams, driven by the loop without a thread
  _working     the workers: screen the request, run the app, start its response, take the next request
  _serve       the roles built and joined, serve_app, signals, the limits' defaults
"""

from ._accepting import tls_context
from ._head import MAX_HEAD_BYTES, HttpError, parse_head
from ._serve import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_READ_TIMEOUT,
    serve_app,
)

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_IDLE_SECONDS", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_MAX_QUEUED", "DEFAULT_MAX_REQUESTS", "DEFAULT_READ_TIMEOUT", "MAX_HEAD_BYTES", "HttpError",
           "parse_head", "serve_app", "tls_context"]
