"""The Streamable HTTP transport: a WSGI application, and a standard-library server for it.

Rules of this module (WIRE.md §16, in the order of §17):
- It maps HTTP to JSON-RPC and back, nothing more: every protocol rule, the header checks
  included, lives in protocol.dispatch, which also says which status each error gets.
- Safe by default. Only the endpoint path answers (else 404); a Host other than the bound
  loopback names is refused when bound to loopback (DNS rebinding); an Origin that is present and
  not allowed gets 403; only POST (else 405 with Allow); a bearer token, when configured, is
  compared in constant time (else 401); the body must be application/json (else 415) and at most
  max_body_bytes (else 413); an Accept that excludes JSON gets 406. Binding a non-loopback address
  needs a token or an explicit insecure_no_auth.
- Stateless: no session id is issued, Mcp-Session-Id and Last-Event-ID are ignored, so any number
  of processes (gunicorn workers, replicas behind a load balancer) can serve the same clients.
- The stdlib server speaks HTTP/1.1 keep-alive, one thread per connection, at most
  max_connections at once (the rest get 503 at once); a client that stalls longer than
  read_timeout is dropped; SIGTERM/SIGINT stop accepting, let in-flight requests finish within
  grace_seconds, and exit 0 (also as PID 1, which has no default signal handling).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Optional, Union
from urllib.parse import unquote, urlsplit

from . import protocol
from ._server import Server
from ._version import __version__
from .errors import ConfigError

__all__ = ["McpApp", "create_app", "serve"]

log = logging.getLogger("mcpserver.http")
access_log = logging.getLogger("mcpserver.http.access")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # a 5 MB payload stays under it even when JSON escaping grows it 6x
MAX_HEADER_BYTES = 32 * 1024  # all header lines together; past it, 431
MAX_DRAIN_BYTES = 64 * 1024  # a refused request's unread body up to this is skipped to keep the connection
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_READ_TIMEOUT = 30.0  # seconds a client may stall while sending, or sit idle on keep-alive
DEFAULT_GRACE_SECONDS = 10.0
DEADLINE_SLACK = 0.001  # seconds a body read may end past its deadline, to skip a settimeout() system call
THREAD_STACK_BYTES = 8 * 1024 * 1024  # what glibc gives threads; musl's 128 KiB default is too small for tools
TOKEN_ENVIRONMENT = "MCPSERVER_TOKEN"
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")

StartResponse = Callable[..., Any]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name in a Host header, without the port ("[::1]:3000" -> "[::1]")."""
    if host_header.startswith("["):
        return host_header.split("]")[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


class McpApp:
    """The WSGI application for one Server. Serve it with `serve`, or any WSGI server."""

    def __init__(self, server: Server, *, path: str = "/mcp", token: Optional[str] = None,
                 allowed_origins: Iterable[str] = (), allowed_hosts: Optional[Iterable[str]] = None,
                 loopback: bool = True, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        """`allowed_hosts` None means: the loopback names when `loopback`, anything otherwise."""
        self.server = server
        self.path = path
        self._token = token.encode() if token else None
        self.allowed_origins = {origin.rstrip("/") for origin in allowed_origins}
        self.loopback = loopback
        hosts = list(allowed_hosts or ())
        self.allowed_hosts: Optional[set[str]] = (
            {h.lower() for h in hosts} | ({*_LOOPBACK_NAMES} if loopback else set())
            if hosts or loopback else None)
        self.max_body_bytes = max_body_bytes

    def _origin_allowed(self, origin: str) -> bool:
        if origin.rstrip("/") in self.allowed_origins:
            return True
        if not self.loopback:
            return False
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and (parts.hostname or "") in ("localhost", "127.0.0.1", "::1")

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        started = time.perf_counter()
        status, headers, body = self._respond(environ)
        start_response(status, headers)
        access_log.info('%s "%s %s" %s %s %.1fms', environ.get("REMOTE_ADDR", "-"), environ.get("REQUEST_METHOD"),
                        environ.get("PATH_INFO"), status[:3], environ.get("HTTP_MCP_METHOD", "-"),
                        (time.perf_counter() - started) * 1000)
        return [body] if body else []

    def _respond(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        if environ.get("PATH_INFO", "") != self.path:
            return _plain("404 Not Found", f"Not found: the MCP endpoint is {self.path}")
        if self.allowed_hosts is not None:
            host = _host_name(environ.get("HTTP_HOST", "")).lower()
            if host not in self.allowed_hosts:
                return _plain("403 Forbidden", f"Host {host!r} is not allowed (DNS rebinding protection)")
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and not self._origin_allowed(origin):
            return _plain("403 Forbidden", f"Origin {origin!r} is not allowed")
        if environ.get("REQUEST_METHOD") != "POST":
            status, headers, body = _plain("405 Method Not Allowed", "The MCP endpoint accepts POST only")
            return status, [*headers, ("Allow", "POST")], body
        if self._token is not None:
            given = environ.get("HTTP_AUTHORIZATION", "")
            scheme, _, credential = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), self._token):
                status, headers, body = _plain("401 Unauthorized", "A valid bearer token is required")
                return status, [*headers, ("WWW-Authenticate", 'Bearer realm="mcp"')], body
        if _media_type(environ.get("CONTENT_TYPE", "")) != "application/json":
            return _plain("415 Unsupported Media Type", "Send the JSON-RPC message as application/json")
        accept = environ.get("HTTP_ACCEPT")
        if accept is not None and not {_media_type(t) for t in accept.split(",")} & {
                "application/json", "*/*", "application/*", ""}:
            return _plain("406 Not Acceptable", "Responses are application/json; accept it")
        body_or_error = self._read_body(environ)
        if isinstance(body_or_error, tuple):
            return body_or_error
        mirrored = {key[5:].lower().replace("_", "-"): value for key, value in environ.items()
                    if key.startswith("HTTP_")}
        reply = protocol.dispatch_bytes(body_or_error, self.server, mirrored)
        if reply.response is None:
            return "202 Accepted", [("Content-Type", "text/plain"), ("Content-Length", "0")], b""
        data = protocol.encode(reply.response)
        return _STATUS_LINES.get(reply.status, f"{reply.status} Status"), [
            ("Content-Type", "application/json"), ("Content-Length", str(len(data))), ("Cache-Control", "no-store")
        ], data

    def _read_body(self, environ: dict[str, Any]) -> Union[bytes, tuple[str, list[tuple[str, str]], bytes]]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or -1)
        except ValueError:
            return _plain("400 Bad Request", "Content-Length is not a number")
        if length > self.max_body_bytes:
            return self._too_large()
        stream = environ["wsgi.input"]
        body = stream.read(length) if length >= 0 else stream.read(self.max_body_bytes + 1)
        if len(body) > self.max_body_bytes:
            return self._too_large()
        if length >= 0 and len(body) < length:
            return _plain("400 Bad Request", "The body ended before Content-Length bytes")
        return bytes(body)

    def _too_large(self) -> tuple[str, list[tuple[str, str]], bytes]:
        return _plain("413 Content Too Large", f"The body is larger than {self.max_body_bytes} bytes")


_STATUS_LINES = {200: "200 OK", 400: "400 Bad Request", 404: "404 Not Found", 500: "500 Internal Server Error"}


def _plain(status: str, message: str) -> tuple[str, list[tuple[str, str]], bytes]:
    data = (message + "\n").encode()
    return status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))], data


def create_app(target: Union[Server, str], **options: Any) -> McpApp:
    """A WSGI app for a Server or a TARGET (as on the command line); the token defaults to $MCPSERVER_TOKEN.

        gunicorn -w 4 'mcpserver.http:create_app("server/examples/demo.py")'
    """
    if isinstance(target, str):
        from ._loader import load_target

        target = load_target(target)
    options.setdefault("token", os.environ.get(TOKEN_ENVIRONMENT) or None)
    return McpApp(target, **options)


# ---------------------------------------------------------------------------------------------
# The standard-library server


class _Input:
    """wsgi.input for one request: at most Content-Length bytes, the whole body within the deadline.

    The connection's timeout is `timeout` when the request starts. It is lowered to the time left
    only when the deadline is nearer than that by more than DEADLINE_SLACK, so a body that arrives
    with its headers costs no system call to set a timeout, and none to restore it.
    """

    def __init__(self, rfile: Any, length: int, deadline: float, connection: socket.socket, timeout: float):
        self._rfile = rfile
        self._remaining = max(length, 0)
        self._deadline = deadline
        self._connection = connection
        self._timeout = timeout
        self.timeout_changed = False

    @property
    def remaining(self) -> int:
        return self._remaining

    def read(self, size: int = -1) -> bytes:
        want = self._remaining if size < 0 else min(size, self._remaining)
        chunks = []
        while want > 0:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("the client sent its body too slowly")
            if left < self._timeout - DEADLINE_SLACK:
                self._connection.settimeout(left)
                self._timeout = left
                self.timeout_changed = True
            chunk = self._rfile.read1(min(want, 1 << 20)) if hasattr(self._rfile, "read1") else self._rfile.read(want)
            if not chunk:
                break
            chunks.append(chunk)
            want -= len(chunk)
            self._remaining -= len(chunk)
        return b"".join(chunks)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"mcpserver/{__version__}"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Without this, keep-alive requests stall ~40 ms each: Nagle meets delayed ACK (measured: 23 vs 3,000 req/s).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connection.settimeout(self.server.read_timeout)

    def log_message(self, format: str, *args: Any) -> None:  # the app keeps the access log
        log.debug(format, *args)

    def _serve(self) -> None:
        # One pass over the parsed header lines. http.client decodes them as latin-1, which yields no
        # surrogates, so raw_items() gives exactly what items() and get() would, without the email
        # package's per-call policy work (measured: a fifth of this handler's time).
        fields = list(self.headers.raw_items())
        header_bytes = sum(len(k) + len(v) + 4 for k, v in fields)
        if header_bytes > MAX_HEADER_BYTES:
            self.close_connection = True
            self.send_error(431, f"Request headers larger than {MAX_HEADER_BYTES} bytes")
            return
        first: dict[str, str] = {}  # lower-case name -> its first value, as Message.get gives it
        for name, value in fields:
            first.setdefault(name.lower(), value)
        if first.get("transfer-encoding", "").lower() not in ("", "identity"):
            self.close_connection = True
            self.send_error(411, "Send a Content-Length; chunked bodies are not accepted")
            return
        with self.server.track_request():
            self._run_app(fields, first)

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    def _run_app(self, fields: list[tuple[str, str]], first: dict[str, str]) -> None:
        path, _, query = self.path.partition("?")
        length = first.get("content-length") or ""
        body = _Input(self.rfile, int(length) if length.isdigit() else 0, time.monotonic() + self.server.read_timeout,
                      self.connection, self.server.read_timeout)
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command, "SCRIPT_NAME": "", "PATH_INFO": unquote(path, "latin-1"),
            "QUERY_STRING": query, "CONTENT_TYPE": first.get("content-type", ""),
            "CONTENT_LENGTH": length, "SERVER_NAME": self.server.server_name,
            "SERVER_PORT": str(self.server.server_port), "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0], "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
            "wsgi.input": body,
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in fields:
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = f"{environ[key]},{value}" if key in environ else value
        response: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            response["status"], response["headers"] = status, headers
            return lambda data: None

        output = b"".join(self.server.app(environ, start_response))
        unread = body.remaining
        # A request refused before its body was read: skip a small body, else hang up.
        if unread and (unread > MAX_DRAIN_BYTES or len(body.read()) < unread):
            self.close_connection = True
        if self.server.stopping.is_set():
            self.close_connection = True
        head = [f"HTTP/1.1 {response['status']}", f"Server: {self.server_version}"]
        head += [f"{name}: {value}" for name, value in response["headers"]]
        if self.close_connection:
            head.append("Connection: close")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        if body.timeout_changed:
            self.connection.settimeout(self.server.read_timeout)
        if self.command == "HEAD":
            output = b""
        if len(output) < 65536:  # one send for the common case
            self.wfile.write(data + output)
        else:
            self.wfile.write(data)
            self.wfile.write(output)

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, socket.timeout) as exc:  # a client that vanished or stalled
            log.debug("connection from %s ended: %s", self.client_address[0], exc)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # idle keep-alive connections must not hold up the exit
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: McpApp, *, max_connections: int, read_timeout: float):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.app = app
        self.read_timeout = read_timeout
        self.stopping = threading.Event()
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._in_flight = 0
        self._idle = threading.Condition()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would resolve the host's FQDN: a DNS lookup that stalls in offline containers.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            log.warning("refusing %s: already %s connections open", client_address[0], self.max_connections)
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
                                b"Content-Type: text/plain\r\nContent-Length: 21\r\n\r\nToo many connections\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def track_request(self) -> _InFlight:
        return _InFlight(self)

    def wait_idle(self, seconds: float) -> int:
        """Wait for in-flight requests to finish; return how many are still running."""
        deadline = time.monotonic() + seconds
        with self._idle:
            while self._in_flight and time.monotonic() < deadline:
                self._idle.wait(deadline - time.monotonic())
            return self._in_flight


class _InFlight:
    def __init__(self, server: _Server):
        self.server = server

    def __enter__(self) -> None:
        with self.server._idle:
            self.server._in_flight += 1

    def __exit__(self, *exc: Any) -> None:
        with self.server._idle:
            self.server._in_flight -= 1
            self.server._idle.notify_all()


def serve(server: Server, *, host: str = "127.0.0.1", port: int = 3000, path: str = "/mcp",
          token: Optional[str] = None, insecure_no_auth: bool = False, allowed_origins: Iterable[str] = (),
          allowed_hosts: Iterable[str] = (), max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          max_connections: int = DEFAULT_MAX_CONNECTIONS, read_timeout: float = DEFAULT_READ_TIMEOUT,
          grace_seconds: float = DEFAULT_GRACE_SECONDS) -> int:
    """Serve over HTTP with the standard library until SIGTERM/SIGINT; return the exit status (0)."""
    token = token or os.environ.get(TOKEN_ENVIRONMENT) or None
    loopback = _is_loopback(host)
    if not loopback and token is None and not insecure_no_auth:
        raise ConfigError(f"refusing to listen on {host} without authentication: pass --token (or set "
                          f"{TOKEN_ENVIRONMENT}), or --insecure-no-auth if something in front authenticates")
    if not path.startswith("/"):
        raise ConfigError(f"the endpoint path must start with '/', not {path!r}")
    app = McpApp(server, path=path, token=token, allowed_origins=allowed_origins,
                 allowed_hosts=list(allowed_hosts) or None, loopback=loopback, max_body_bytes=max_body_bytes)
    threading.stack_size(THREAD_STACK_BYTES)
    try:
        httpd = _Server((host, port), app, max_connections=max_connections, read_timeout=read_timeout)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound_host, bound_port = str(httpd.server_address[0]), int(httpd.server_address[1])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    auth = ("bearer token required" if token else
            "WARNING: no authentication (--insecure-no-auth)" if not loopback else "loopback only, no token")
    print(f"mcpserver: serving {server.name} {server.version} at http://{shown}:{bound_port}{path} ({auth})",
          file=sys.stderr, flush=True)

    stop = threading.Event()
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
        except ValueError:  # not the main thread: the embedding application owns signals
            pass
    worker = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="mcpserver-accept",
                              daemon=True)
    worker.start()
    try:
        while not stop.wait(0.5):
            if not worker.is_alive():
                break
    finally:
        httpd.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        left = httpd.wait_idle(grace_seconds)
        if left:
            log.warning("exiting with %d request(s) still running after %.0f s", left, grace_seconds)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    log.info("stopped")
    return 0
