"""The built-in HTTP/1.1 server: any WSGI app, from one event loop and a bounded pool of workers. It knows no MCP
(mcpserver.http is the MCP app it serves; docs/adr/0004-our-own-http-server.md says why the server is ours).

The package, by role (each module's docstring states its rules):
  _machine     a connection's states and every rule between them, its request head parsed strictly (RFC 9112)
               among them: events in, actions out; no socket, thread, lock or clock (h11's Connection is the model)
  _poller      readiness: epoll with EPOLLONESHOT, or poll() where there is none
  _connection  one client connection: its socket, what it still has to write, its machine, who has it
  _unix        a Unix socket's file (--http unix:PATH): its directory and what is there checked, made with its mode,
               removed on exit
  _accepting   the door: the listening socket (TCP or Unix), newcomers waiting for a place, TLS for new ones
  _loop        the loop thread: drives the machine of every connection no worker has (readiness, deadlines,
               hang-ups, push streams)
  _workers     the pool of workers: each drives the machine of the connection it has (screen, run the app,
               write its response, take the client's next request)
  _serve       serve_app: the door, the loop and the workers built, each given what it uses of the others;
               signals; ServeOptions, the server's options and their defaults
"""

from ._accepting import tls_context
from ._machine import MAX_HEAD_BYTES, HttpError, parse_head
from ._serve import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_READ_TIMEOUT,
    ServeOptions,
    serve_app,
)

__all__ = ["DEFAULT_HEADER_TIMEOUT", "DEFAULT_IDLE_SECONDS", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_MAX_QUEUED", "DEFAULT_MAX_REQUESTS", "DEFAULT_READ_TIMEOUT", "MAX_HEAD_BYTES", "HttpError",
           "ServeOptions", "parse_head", "serve_app", "tls_context"]
