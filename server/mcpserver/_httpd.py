"""The built-in HTTP/1.1 server for the WSGI app (docs/adr/0004-our-own-http-server.md says why it is ours).

Rules of this module:
- Requests are parsed strictly (RFC 9112): a request line of token, target and HTTP/1.0 or 1.1;
  header names are tokens, values hold no control characters, no obsolete line folding, at most
  MAX_HEAD_BYTES in all, exactly one Host on HTTP/1.1. Framing is read once, here: Content-Length
  is one run of digits (repeats must agree), and any Transfer-Encoding is refused (411 for
  chunked, 501 otherwise). After any framing error the connection is closed, so bytes meant as a
  body can never be read as another request.
- Deadlines: a client may idle on keep-alive for read_timeout; once a request's first byte has
  arrived, its whole head must arrive within header_timeout and its body within read_timeout.
- One thread per connection, at most max_connections. At the limit, a new connection takes the
  slot of the connection that has waited longest for its next request (idle, or still sending its
  head), so idle or trickling clients cannot shut others out; only when every slot is busy with
  a request is the newcomer answered 503.
- Responses with a Content-Length go out as they are; without one (a stream) they are sent
  chunked, each piece as soon as the app yields it. A client that closes its connection while
  its request runs is noticed by one watcher thread, which calls what the app registered through
  environ["mcpserver.on_disconnect"] (how the app cancels a request whose client has gone).
- SIGTERM/SIGINT: stop accepting, close idle connections, let requests in flight finish within
  grace_seconds, exit 0 (also as PID 1). A second signal ends the wait at once.
- environ["mcpserver.headers"] holds the header lines exactly as sent (name, value), for the app;
  the CGI-style HTTP_* keys fold "-" and "_" together.
- TLS (tls_cert, tls_key): the handshake runs on the connection's own thread within header_timeout,
  while the connection still counts as waiting (so it can be reclaimed); TLS 1.2 or newer with the
  ssl module's defaults; a plain-HTTP request on the port gets a plain 400 that says so. SIGHUP loads
  the certificate again: new connections get it, open ones keep theirs; if it cannot be loaded,
  the old one stays and stderr says why.
"""

from __future__ import annotations

import os
import re
import select
import socket
import sys
import threading
import time

from ._json import THREAD_STACK_BYTES
from ._server import Server
from ._version import __version__
from .errors import ConfigError
from .http import DEFAULT_MAX_BODY_BYTES, TOKEN_ENVIRONMENT, McpApp, is_loopback, read_token_file

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Iterable, Optional
if TYPE_CHECKING:
    import signal
else:
    try:  # the C module: signal.py wraps every constant in an enum, which costs start-up
        import _signal as signal
    except ImportError:  # an interpreter without it (PyPy)
        import signal

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_READ_TIMEOUT",
    "MAX_HEAD_BYTES",
    "HttpError",
    "parse_head",
    "serve",
    "serve_app",
    "tls_context",
]

DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_READ_TIMEOUT = 30.0  # seconds a client may idle on keep-alive, or take to send a body
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds from a request's first byte to the end of its head
DEFAULT_GRACE_SECONDS = 10.0
MAX_HEAD_BYTES = 32 * 1024  # request line and header lines together; past it, 431
MAX_HEADER_LINES = 100
MAX_DRAIN_BYTES = 64 * 1024  # a refused request's unread body up to this is skipped to keep the connection
MAX_LENGTH_DIGITS = 15  # a Content-Length longer than this is no body anyone may send
EPOLLRDHUP = getattr(select, "EPOLLRDHUP", 0x2000)  # Linux's value; PyPy's select module does not define it
_WAKEUP_FD = -1  # the key, among the replaced signal handlers, of the wakeup fd that was set before
# When every slot is busy, how long a newcomer waits for one to start waiting: a connection that has just
# sent its answer marks itself waiting a moment after its client can read it and connect again.
FULL_HOUSE_GRACE = 0.05
DEADLINE_SLACK = 0.001  # a read may end this far past its deadline, to save a settimeout() system call
SERVER_HEADER = f"mcpserver/{__version__}"

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_REQUEST_LINE = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([!-~]+) HTTP/(1\.[01])")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_HEAD_END = re.compile(b"\r?\n\r?\n")
_REASONS = {100: "Continue", 200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable", 408: "Request Timeout",
            411: "Length Required", 413: "Content Too Large", 415: "Unsupported Media Type",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
            503: "Service Unavailable", 505: "HTTP Version Not Supported"}


class HttpError(Exception):
    """A request the server answers itself, and then closes the connection."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class Head:
    """A request's line and header fields, parsed and checked."""

    __slots__ = ("expect_continue", "headers", "keep_alive", "length", "method", "target", "version")

    def __init__(self, method: str, target: str, version: str, headers: list[tuple[str, str]], length: int,
                 keep_alive: bool, expect_continue: bool):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.length = length
        self.keep_alive = keep_alive
        self.expect_continue = expect_continue


def parse_head(data: bytes) -> Head:
    """Parse a request head (without its blank line); HttpError for anything RFC 9112 does not allow."""
    text = data.decode("latin-1")
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.endswith("\r"):
            lines[index] = line = line[:-1]
        if "\r" in line:
            raise HttpError(400, "A bare CR in the request head")
    match = _REQUEST_LINE.fullmatch(lines[0])
    if match is None:
        if re.fullmatch(r"\S+ \S+ HTTP/\d\.\d", lines[0]):
            raise HttpError(505, "Only HTTP/1.0 and HTTP/1.1 are served")
        raise HttpError(400, "Malformed request line")
    method, target, version = match.groups()
    if len(lines) - 1 > MAX_HEADER_LINES:
        raise HttpError(431, f"More than {MAX_HEADER_LINES} header lines")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise HttpError(400, "Malformed header line" if not line[:1].isspace() else "Folded header lines are "
                            "not accepted")
        value = value.strip(" \t")
        if not _FIELD_VALUE.fullmatch(value):
            raise HttpError(400, f"Header {name} holds a control character")
        headers.append((name, value))
    return _framed(method, target, version, headers)


def _framed(method: str, target: str, version: str, headers: list[tuple[str, str]]) -> Head:
    hosts, connection, expect = 0, "", ""
    lengths: set[str] = set()
    encodings: list[str] = []
    for name, value in headers:
        lowered = name.lower()
        if lowered == "host":
            hosts += 1
        elif lowered == "content-length":
            lengths.update(part.strip(" \t") for part in value.split(","))
        elif lowered == "transfer-encoding":
            encodings.append(value)
        elif lowered == "connection":
            connection += "," + value.lower()
        elif lowered == "expect":
            expect = value.lower()
    if hosts > 1 or (hosts == 0 and version == "1.1"):
        raise HttpError(400, "An HTTP/1.1 request needs exactly one Host header")
    if encodings:
        last = encodings[-1].split(",")[-1].strip(" \t").lower()
        if last == "chunked":
            raise HttpError(411, "Send a Content-Length; chunked bodies are not accepted")
        raise HttpError(501, f"Transfer-Encoding {encodings[-1]!r} is not supported")
    length = 0
    if lengths:
        if len(lengths) > 1:
            raise HttpError(400, "Content-Length headers disagree")
        text = lengths.pop()
        if not (text.isascii() and text.isdigit() and len(text) <= MAX_LENGTH_DIGITS):
            raise HttpError(400, "Content-Length is not a number of bytes")
        length = int(text)
    tokens = {token.strip(" \t") for token in connection.split(",")}
    keep_alive = "close" not in tokens and (version == "1.1" or "keep-alive" in tokens)
    return Head(method, target, version, headers, length, keep_alive, expect == "100-continue")


class _Body:
    """wsgi.input: at most Content-Length bytes, the rest of the buffer first, the whole body by the deadline."""

    def __init__(self, connection: _Connection, length: int, deadline: float):
        self._connection = connection
        self.remaining = length
        self._deadline = deadline

    def read(self, size: int = -1) -> bytes:
        want = self.remaining if size is None or size < 0 else min(size, self.remaining)
        chunks = []
        while want > 0:
            chunk = self._connection.take(want, self._deadline)
            if not chunk:
                break
            chunks.append(chunk)
            want -= len(chunk)
            self.remaining -= len(chunk)
        return b"".join(chunks)

    def readline(self, size: int = -1) -> bytes:  # the WSGI spec asks for it; the app never needs it
        return self.read(size)

    def __iter__(self) -> Any:
        return iter([self.read()])


class _Connection:
    """One client connection, served by its own thread until it closes, idles out or is reclaimed."""

    def __init__(self, server: _Server, sock: socket.socket, address: tuple[Any, ...]):
        self.server = server
        self.sock = sock
        self.address = address
        self.buffer = bytearray()
        self.timeout = server.read_timeout
        self.lock = threading.Lock()
        self.busy = False
        self.waiting_since = time.monotonic()
        self.reclaimed = False
        self.tls = server.tls  # taken now: a SIGHUP reload affects connections accepted after it
        # Without TCP_NODELAY keep-alive requests stall ~40 ms each: Nagle meets delayed ACK (23 vs 3,000 req/s).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout)

    # -- reading ------------------------------------------------------------------------------------

    def _recv(self, deadline: float, size: int = 65536) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")
        if left < self.timeout - DEADLINE_SLACK:
            self.sock.settimeout(left)  # a system call: only when the deadline is nearer than the timeout
            self.timeout = left
        return self.sock.recv(size)

    def take(self, size: int, deadline: float) -> bytes:
        """Up to `size` bytes of body: buffered ones first."""
        if self.buffer:
            chunk = bytes(self.buffer[:size])
            del self.buffer[:size]
            return chunk
        chunk = self._recv(deadline, min(max(size, 65536), 1 << 20))
        if len(chunk) > size:  # a pipelined request follows the body
            self.buffer += chunk[size:]
            chunk = chunk[:size]
        return chunk

    def read_head(self) -> Optional[Head]:
        """The next request's head; None when the client closed or idled out before sending one."""
        if self.timeout != self.server.read_timeout:
            self.timeout = self.server.read_timeout
            self.sock.settimeout(self.timeout)
        deadline = time.monotonic() + self.server.read_timeout
        first_byte = bool(self.buffer)
        if first_byte:
            deadline = time.monotonic() + self.server.header_timeout
        searched = 0
        while True:
            if self.buffer.startswith((b"\r", b"\n")):  # RFC 9112 §2.2: empty lines before a request are skipped
                self.buffer = self.buffer.lstrip(b"\r\n")
            end = _HEAD_END.search(self.buffer, max(0, searched - 3), MAX_HEAD_BYTES + 4)
            if end is not None:
                head = bytes(self.buffer[:end.start()])
                del self.buffer[:end.end()]
                return parse_head(head)
            searched = len(self.buffer)
            if searched > MAX_HEAD_BYTES:
                raise HttpError(431, f"Request head larger than {MAX_HEAD_BYTES} bytes")
            try:
                chunk = self._recv(deadline)
            except socket.timeout:
                if self.buffer:
                    raise HttpError(408, f"The request head took longer than {self.server.header_timeout:g} s") \
                        from None
                return None
            if not chunk:
                return None
            if not first_byte:
                first_byte = True
                deadline = time.monotonic() + self.server.header_timeout
            self.buffer += chunk

    # -- the loop -----------------------------------------------------------------------------------

    def _start_tls(self, context: Any) -> bool:
        """The TLS handshake; False (the connection is to be closed) if it fails or the client spoke plain HTTP."""
        self.sock.settimeout(self.server.header_timeout)
        first = self.sock.recv(1, socket.MSG_PEEK)
        if first[:1].isalpha():  # a TLS handshake starts with byte 0x16; this is a plain-HTTP request
            self.sock.recv(MAX_HEAD_BYTES)  # taken, so closing with it unread does not reset the answer away
            self._refuse(HttpError(400, "This port speaks HTTPS: use https://"))
            return False
        if not first:
            return False
        tls_sock = context.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
        self.sock = tls_sock  # before the handshake, so a reclaim can interrupt it
        tls_sock.do_handshake()
        self.sock.settimeout(self.timeout)
        return True

    def serve(self) -> None:
        try:
            if self.tls is not None and not self._start_tls(self.tls):
                return
            while not self.server.stopping.is_set():
                try:
                    head = self.read_head()
                except HttpError as refused:
                    self._refuse(refused)
                    return
                if head is None or not self._claim():
                    return
                try:
                    keep_alive = self._respond(head)
                except HttpError as failed:
                    self._refuse(failed)
                    return
                finally:
                    self.busy = False
                    self.waiting_since = time.monotonic()
                    self.server.now_waiting()
                if not keep_alive:
                    return
        except (OSError, socket.timeout):  # a client that vanished or stalled
            pass
        finally:
            self.server.forget(self)
            try:
                self.sock.close()
            except OSError:
                pass

    def _claim(self) -> bool:
        """Mark the connection busy, unless it was reclaimed for a newcomer while it waited."""
        with self.lock:
            if self.reclaimed:
                return False
            self.busy = True
            return True

    def reclaim(self) -> bool:
        """Called by the acceptor: end this connection if it is waiting, so its slot can be reused."""
        with self.lock:
            if self.busy or self.reclaimed:
                return False
            self.reclaimed = True
        try:  # its thread's recv returns at once (the plain socket's shutdown: TLS state is the thread's)
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def _refuse(self, refused: HttpError) -> None:
        body = (refused.message + "\n").encode()
        self._send(f"HTTP/1.1 {refused.status} {_REASONS.get(refused.status, 'Error')}\r\nServer: {SERVER_HEADER}\r\n"
                   "Content-Type: text/plain; charset=utf-8\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1") + body)

    def _send(self, data: bytes) -> None:
        if self.timeout != self.server.read_timeout:
            self.timeout = self.server.read_timeout
            self.sock.settimeout(self.timeout)
        self.sock.sendall(data)

    def _respond(self, head: Head) -> bool:
        """Run the app for one request and send its response; whether the connection may be kept."""
        if head.expect_continue and head.length:
            self._send(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = _Body(self, head.length, time.monotonic() + self.server.read_timeout)
        watch = _Watch(self.server.watcher, self.sock)
        environ = self._environ(head, body, watch)
        response: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            response["status"], response["headers"] = status, headers
            return lambda data: None

        try:
            result = self.server.app(environ, start_response)
        except OSError:  # the client stalled or vanished while the app read the body
            raise
        except Exception:  # the app's own bug: answer for it, and say so where the app logs
            import traceback

            traceback.print_exc()
            raise HttpError(500, "Internal server error") from None
        try:
            keep_alive = head.keep_alive and not self.server.stopping.is_set()
            unread = body.remaining
            if unread and (unread > MAX_DRAIN_BYTES or len(body.read()) < unread):
                keep_alive = False  # a refused request's body: skip a small one, else hang up
            keep_alive = self._write(head, response, result, keep_alive)
        finally:
            watch.end()
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return keep_alive

    def _environ(self, head: Head, body: _Body, watch: _Watch) -> dict[str, Any]:
        path, _, query = head.target.partition("?")
        if path.startswith(("http://", "https://")):  # absolute-form: what a proxy sends
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        content_type = content_length = ""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": head.method, "SCRIPT_NAME": "", "PATH_INFO": _unquote(path),
            "QUERY_STRING": query, "RAW_URI": head.target, "SERVER_NAME": self.server.host,
            "SERVER_PORT": str(self.server.port), "SERVER_PROTOCOL": "HTTP/" + head.version,
            "REMOTE_ADDR": str(self.address[0]) if self.address else "", "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if self.tls is not None else "http", "wsgi.input": body,
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
            "mcpserver.headers": head.headers, "mcpserver.on_disconnect": watch.on_disconnect,
        }
        for name, value in head.headers:
            key = "HTTP_" + name.upper().replace("-", "_")
            if key == "HTTP_CONTENT_TYPE":
                content_type = value
            elif key == "HTTP_CONTENT_LENGTH":
                content_length = value
            else:
                environ[key] = f"{environ[key]},{value}" if key in environ else value
        environ["CONTENT_TYPE"] = content_type
        environ["CONTENT_LENGTH"] = str(head.length) if content_length else ""  # the one value framing settled on
        return environ

    def _write(self, head: Head, response: dict[str, Any], result: Iterable[bytes], keep_alive: bool) -> bool:
        chunks = iter(result)
        first = next(chunks, b"")  # start_response has been called once the first piece exists
        lines = [f"HTTP/1.1 {response['status']}", f"Server: {SERVER_HEADER}"]
        lines += [f"{name}: {value}" for name, value in response["headers"]]
        sized = any(name.lower() == "content-length" for name, _ in response["headers"])
        chunked = not sized and head.version == "1.1"
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        elif not sized:
            keep_alive = False  # HTTP/1.0 and no length: the end of the body is the end of the connection
        if not keep_alive:
            lines.append("Connection: close")
        elif head.version == "1.0":
            lines.append("Connection: keep-alive")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if head.method == "HEAD":
            self._send(data)
            return keep_alive
        frame = _chunk if chunked else bytes
        if len(first) < 65536:  # one send for the common case
            self._send(data + frame(first))
        else:
            self._send(data)
            self._send(frame(first))
        for piece in chunks:
            if piece:
                self._send(frame(piece))
        if chunked:
            self._send(b"0\r\n\r\n")
        return keep_alive


def _unquote(path: str) -> str:
    if "%" not in path:
        return path
    from urllib.parse import unquote

    return unquote(path, "latin-1")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


class _Watch:
    """The disconnect watch of one request: registered with the watcher only if the app asks for it."""

    __slots__ = ("_callbacks", "_sock", "_watcher")

    def __init__(self, watcher: _Watcher, sock: socket.socket):
        self._watcher = watcher
        self._sock = sock
        self._callbacks: list[Callable[[], None]] = []

    def on_disconnect(self, callback: Callable[[], None]) -> None:
        if not self._callbacks:
            self._watcher.add(self._sock, self._callbacks)
        self._callbacks.append(callback)

    def end(self) -> None:
        if self._callbacks:
            self._watcher.remove(self._sock)


class _Watcher:
    """One thread that notices clients closing their connections while their requests run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[socket.socket, list[Callable[[], None]]]] = {}
        self._poll: Optional[Any] = None

    def add(self, sock: socket.socket, callbacks: list[Callable[[], None]]) -> None:
        with self._lock:
            if self._poll is None:
                self._poll = select.epoll() if hasattr(select, "epoll") else None
                if self._poll is None:  # no epoll: disconnects go unnoticed until the response is written
                    return
                threading.Thread(target=self._run, name="mcpserver-disconnects", daemon=True).start()
            self._watched[sock.fileno()] = (sock, callbacks)
            try:
                self._poll.register(sock.fileno(), select.EPOLLIN | EPOLLRDHUP)
            except OSError:
                del self._watched[sock.fileno()]

    def remove(self, sock: socket.socket) -> None:
        with self._lock:
            if self._watched.pop(sock.fileno(), None) is not None and self._poll is not None:
                try:
                    self._poll.unregister(sock.fileno())
                except OSError:
                    pass

    def _run(self) -> None:
        assert self._poll is not None
        hung_up = EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR
        while True:
            for fd, events in self._poll.poll():
                with self._lock:
                    watched = self._watched.pop(fd, None)
                    if watched is None:
                        continue
                    try:
                        self._poll.unregister(fd)
                    except OSError:
                        pass
                if events & hung_up:  # data alone is a pipelined request: no longer watchable, left alone
                    for callback in list(watched[1]):
                        callback()


class _Server:
    """The listening socket, the connections and their slots."""

    def __init__(self, app: Callable[..., Any], host: str, port: int, *, max_connections: int, read_timeout: float,
                 header_timeout: float, tls: Any = None):
        self.app = app
        self.tls = tls  # an ssl.SSLContext, or None for plain HTTP
        self.read_timeout = read_timeout
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.stopping = threading.Event()
        self.reload: Optional[tuple[str, Optional[str]]] = None  # (certificate, key) a SIGHUP asked to load
        self.watcher = _Watcher()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.connections: set[_Connection] = set()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.listener.bind((host, port))
            self.listener.listen(128)
            self.listener.setblocking(False)  # accept after poll: a client that gave up must not block it
        except OSError:
            self.listener.close()
            raise
        self.host, self.port = str(self.listener.getsockname()[0]), int(self.listener.getsockname()[1])
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)

    def wake(self) -> None:
        try:
            os.write(self._wake_write, b"!")
        except OSError:
            pass

    def accept_until_stopped(self) -> None:
        poll = select.poll()
        poll.register(self.listener, select.POLLIN)
        poll.register(self._wake_read, select.POLLIN)
        while not self.stopping.is_set():
            events = poll.poll()
            if any(fd == self._wake_read for fd, _ in events):
                os.read(self._wake_read, 64)
                if self.reload is not None:
                    files, self.reload = self.reload, None
                    self.reload_certificate(*files)
                continue
            try:
                sock, address = self.listener.accept()
            except OSError:  # the client gave up before we accepted
                continue
            self._admit(sock, address)

    def reload_certificate(self, cert: str, key: Optional[str]) -> None:
        """Load the certificate again for connections accepted from now on; keep the current one if it fails."""
        try:
            self.tls = tls_context(cert, key)
            print("mcpserver: SIGHUP: TLS certificate reloaded", file=sys.stderr, flush=True)
        except ConfigError as exc:
            print(f"mcpserver: SIGHUP: keeping the current TLS certificate: {exc}", file=sys.stderr, flush=True)

    def _admit(self, sock: socket.socket, address: Any) -> None:
        if not self._make_room():
            try:
                if self.tls is None:  # a TLS client could not read it
                    sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
                                 b"Content-Type: text/plain\r\nContent-Length: 21\r\n\r\nToo many connections\n")
            except OSError:
                pass
            sock.close()
            return
        connection = _Connection(self, sock, address)
        with self._lock:
            self.connections.add(connection)
        threading.Thread(target=connection.serve, name="mcpserver-connection", daemon=True).start()

    def _make_room(self) -> bool:
        """Whether a slot is free, reclaiming the longest-waiting connection's slot when none is."""
        grace = time.monotonic() + FULL_HOUSE_GRACE
        with self._lock:
            while True:
                if len(self.connections) < self.max_connections:
                    return True
                waiting = sorted((c for c in self.connections if not c.busy), key=lambda c: c.waiting_since)
                if waiting or time.monotonic() >= grace:
                    break
                self._idle.wait(grace - time.monotonic())
        for connection in waiting:
            if connection.reclaim():
                break
        else:
            return False
        deadline = time.monotonic() + 1.0
        with self._lock:
            while len(self.connections) >= self.max_connections and time.monotonic() < deadline:
                self._idle.wait(deadline - time.monotonic())
            return len(self.connections) < self.max_connections

    def now_waiting(self) -> None:
        """A connection finished a request: wake an acceptor waiting for a slot (only ever one, when full)."""
        if len(self.connections) >= self.max_connections:
            with self._lock:
                self._idle.notify_all()

    def forget(self, connection: _Connection) -> None:
        with self._lock:
            self.connections.discard(connection)
            self._idle.notify_all()

    def drain(self, grace_seconds: float, hurry: threading.Event) -> int:
        """Close waiting connections, let busy ones finish; return how many were still busy at the end."""
        self.listener.close()
        deadline = time.monotonic() + grace_seconds
        while True:
            with self._lock:
                connections = list(self.connections)
            for connection in connections:
                connection.reclaim()
            busy = sum(1 for c in connections if c.busy)
            if not busy or time.monotonic() >= deadline or hurry.is_set():
                return busy
            with self._lock:
                self._idle.wait(min(0.1, max(0.0, deadline - time.monotonic())))


def tls_context(cert_file: str, key_file: Optional[str] = None) -> Any:
    """A server-side ssl.SSLContext: TLS 1.2 or newer, the ssl module's default ciphers, HTTP/1.1 by ALPN.
    ConfigError if the certificate or key cannot be loaded (or this Python has no ssl module)."""
    try:
        import ssl
    except ImportError:
        raise ConfigError("this Python was built without the ssl module, so it cannot serve HTTPS") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        files = f"{cert_file} and {key_file}" if key_file else cert_file
        raise ConfigError(f"cannot load the TLS certificate and key from {files}: {exc}") from None
    return context


def _handle_signals(server: _Server, hurry: threading.Event, tls_cert: Optional[str],
                    tls_key: Optional[str]) -> dict[int, Any]:
    """SIGTERM/SIGINT stop the server (a second one: at once); with TLS, SIGHUP loads the certificate
    again. Returns the handlers replaced, to put back."""
    def on_signal(signum: int, frame: Any) -> None:
        if server.stopping.is_set():
            hurry.set()  # a second signal: stop waiting for requests in flight
        server.stopping.set()
        server.wake()

    def reload_certificate(signum: int, frame: Any) -> None:
        # Only a note for the accept loop: a handler that printed could land inside another print to
        # stderr (the banner, a log line) and die of a reentrant call, taking the server with it.
        server.reload = (tls_cert or "", tls_key)
        server.wake()

    previous: dict[int, Any] = {}
    handlers = [(signal.SIGTERM, on_signal), (signal.SIGINT, on_signal)]
    if server.tls is not None:
        handlers.append((signal.SIGHUP, reload_certificate))
    for signum, handler in handlers:
        try:
            previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: the embedding application owns signals
            pass
    if previous:  # a signal the kernel hands to another thread still wakes the accept loop's poll()
        previous[_WAKEUP_FD] = signal.set_wakeup_fd(server._wake_write)
    return previous


def serve_app(app: Callable[..., Any], *, host: str, port: int, banner: Callable[[str, int], None],
              max_connections: int = DEFAULT_MAX_CONNECTIONS, read_timeout: float = DEFAULT_READ_TIMEOUT,
              header_timeout: float = DEFAULT_HEADER_TIMEOUT, grace_seconds: float = DEFAULT_GRACE_SECONDS,
              tls_cert: Optional[str] = None, tls_key: Optional[str] = None) -> int:
    """Serve a WSGI app until SIGTERM/SIGINT; `banner(host, port)` is called once listening. Returns 0.
    With `tls_cert` (and `tls_key`, unless the key is in the same file) it serves HTTPS."""
    for name, value in (("max_connections", max_connections), ("read_timeout", read_timeout),
                        ("header_timeout", header_timeout)):
        if not value > 0:
            raise ConfigError(f"{name} must be positive, not {value!r}")
    if tls_key and not tls_cert:
        raise ConfigError("a TLS key without a certificate: give --tls-cert too")
    tls = tls_context(tls_cert, tls_key) if tls_cert else None
    threading.stack_size(THREAD_STACK_BYTES)
    try:
        server = _Server(app, host, port, max_connections=max_connections, read_timeout=read_timeout,
                         header_timeout=header_timeout, tls=tls)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    hurry = threading.Event()
    previous = _handle_signals(server, hurry, tls_cert, tls_key)
    banner(server.host, server.port)  # after the handlers: a signal sent once the banner is seen is handled
    try:
        server.accept_until_stopped()
    finally:
        shutdown = getattr(app, "shutdown", None)
        if shutdown is not None:  # long-lived streams (subscriptions) end now, so the drain need not wait
            shutdown()
        left = server.drain(grace_seconds, hurry)
        if left:
            print(f"mcpserver: exiting with {left} request(s) still running after the grace period", file=sys.stderr)
        for number, previous_handler in previous.items():
            if number == _WAKEUP_FD:
                signal.set_wakeup_fd(previous_handler)
            else:
                signal.signal(number, previous_handler)
    return 0


def _check_oauth(oauth: Any, *, host: str, path: str, tls: bool, behind_proxy: bool) -> None:
    if not (tls or behind_proxy or is_loopback(host)):
        raise ConfigError(f"refusing OAuth on {host} over plain HTTP: tokens would cross the network in clear. "
                          "Give --tls-cert and --tls-key, or --behind-proxy if a proxy in front terminates TLS")
    from urllib.parse import urlsplit

    if not behind_proxy and (urlsplit(oauth.resource).path or "/") != path:
        raise ConfigError(f"the resource {oauth.resource} does not end with the endpoint path {path}: clients "
                          "would look for the server and its metadata elsewhere (if a proxy in front rewrites "
                          "paths, say --behind-proxy)")


def serve(server: Server, *, host: str = "127.0.0.1", port: int = 3000, path: str = "/mcp",
          token: Optional[str] = None, token_file: Optional[str] = None, insecure_no_auth: bool = False,
          allowed_origins: Iterable[str] = (), allowed_hosts: Iterable[str] = (),
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, oauth: Any = None, behind_proxy: bool = False,
          **limits: Any) -> int:
    """Serve `server` over Streamable HTTP until SIGTERM/SIGINT; return the exit status (0).

    `limits` are serve_app's: max_connections, read_timeout, header_timeout, grace_seconds, tls_cert,
    tls_key. The token is `token`, else the first line of `token_file`, else $MCPSERVER_TOKEN;
    `oauth` (an mcpserver.auth.ResourceServer) takes OAuth access tokens instead.
    """
    if oauth is None:
        token = token or (read_token_file(token_file) if token_file else None) or os.environ.get(TOKEN_ENVIRONMENT)
    loopback = is_loopback(host)
    tls = bool(limits.get("tls_cert"))
    if oauth is not None:
        _check_oauth(oauth, host=host, path=path, tls=tls, behind_proxy=behind_proxy)
    elif not loopback and not token and not insecure_no_auth:
        raise ConfigError(f"refusing to listen on {host} without authentication: pass --token-file (or set "
                          f"{TOKEN_ENVIRONMENT}), or --insecure-no-auth if something in front authenticates")
    app = McpApp(server, path=path, token=token, allowed_origins=allowed_origins,
                 allowed_hosts=list(allowed_hosts) or None, loopback=loopback, insecure_no_auth=insecure_no_auth,
                 max_body_bytes=max_body_bytes, oauth=oauth, behind_proxy=behind_proxy)
    auth = (f"OAuth for {oauth.resource}" if oauth is not None else "bearer token required" if token else
            "WARNING: no authentication (--insecure-no-auth)" if not loopback else "loopback only, no token")
    scheme = "https" if tls else "http"

    def banner(bound_host: str, bound_port: int) -> None:
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        print(f"mcpserver: serving {server.name} {server.version} at {scheme}://{shown}:{bound_port}{path} ({auth})",
              file=sys.stderr, flush=True)

    return serve_app(app, host=host, port=port, banner=banner, **limits)
