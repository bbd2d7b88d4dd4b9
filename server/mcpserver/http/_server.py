"""The built-in HTTP/1.1 server: any WSGI app, from one event loop and a bounded pool of workers
(docs/adr/0004-our-own-http-server.md says why it is ours, and why it is built this way).

Rules of this module:
- It knows no MCP. It serves one WSGI app and offers it, beyond WSGI: environ["mcpserver.headers"]
  (the header lines exactly as sent; the CGI-style HTTP_* keys fold "-" and "_" together),
  environ["mcpserver.on_disconnect"] (a callback for when the client hangs up mid-request), the
  app's `screen(environ)` (called before any body byte is waited for) and push streams
  (environ["mcpserver.push"]; below).
- Requests are parsed strictly (RFC 9112): a request line of token, target and HTTP/1.0 or 1.1;
  header names are tokens, values hold no control characters, no obsolete line folding, at most
  MAX_HEAD_BYTES in all, exactly one Host on HTTP/1.1. Framing is read once, here: Content-Length
  is one run of digits (repeats must agree), and any Transfer-Encoding is refused (411 for
  chunked, 501 otherwise). After any framing error the connection is closed, so bytes meant as a
  body can never be read as another request.
- One loop thread owns every connection that is not running a request: the TLS handshake, idle
  keep-alive, a head or a body on its way, a refused body being skipped, a response a slow reader
  has not taken yet, and push streams. Those cost no thread and no worker, so hundreds of idle,
  slow or listening clients leave the workers to requests.
- A whole request (head and body) runs on one of at most max_requests workers; at most max_queued
  more wait for one, and past that a request is answered 503 with Retry-After.
- At most max_connections open connections (kept below RLIMIT_NOFILE). At the limit, a newcomer
  takes the place of the connection that has waited longest without a request in progress (idle,
  sending a head or a body, skipping a refused body), else of the longest-stalled slow reader;
  only when every connection runs a request or a stream is the newcomer answered 503.
- Deadlines, kept by the loop: read_timeout to idle on keep-alive or to send a body (and for a
  slow reader to take more of a response), header_timeout from a request's first byte to the end
  of its head (and for a TLS handshake).
- Screening: an app with `screen(environ)` has it called on a worker as soon as the head is in,
  before any body byte is waited for. A (status, headers, body) it returns is the answer: the
  body is never read (a small one already on its way is skipped by the loop to keep the
  connection; past MAX_DRAIN_BYTES the connection closes after the answer). An app without it
  gets the whole body read first, at most max_body_bytes.
- Disconnects: while a request runs, the loop watches its socket once the app asks
  (on_disconnect). A hang-up (RST, both directions closed, a failed write) calls the callbacks; a
  half-close (FIN) does not, since the client may still read: the server then sends an interim
  `100 Continue` (HTTP/1.1, before the response), which a peer that is really gone answers with
  an RST.
- Responses with a Content-Length go out as they are; without one they are chunked (HTTP/1.1),
  each piece as soon as the app yields it. A worker writes what the socket takes at once and
  leaves the rest of a whole response to the loop.
- Push streams: a result iterable with `on_ready(wake)` is driven by the loop. The server calls
  on_ready(wake) once, on the worker (the app may do its stream's work there); after wake()
  (any thread) or `poll_interval` seconds it calls next() on the loop, which must not block (b""
  for nothing yet; StopIteration at the end). A slow reader is not given more until it has taken
  what was sent. `probe`, if the iterable has it, is what may be sent between pieces to see
  whether a half-closed peer is still there.
- SIGTERM/SIGINT: stop accepting, close connections that wait, call the app's `shutdown()` if it
  has one (streams end), let requests in flight finish within grace_seconds, exit 0 (also as PID
  1). A second signal ends the wait at once.
- TLS (tls_cert, tls_key): handshakes and records run non-blocking on the loop, the handshake
  within header_timeout; TLS 1.2 or newer with the ssl module's defaults; a plain-HTTP request on
  the port gets a plain 400 that says so. SIGHUP loads the certificate again: new connections get
  it, open ones keep theirs; if it cannot be loaded, the old one stays and stderr says why.
"""

from __future__ import annotations

import errno
import os
import re
import select
import socket
import sys
import threading
import time
from collections import OrderedDict, deque

from .._json import THREAD_STACK_BYTES
from .._malloc import LARGE_BYTES, return_large_buffers
from .._version import __version__
from .._wire import DEFAULT_GRACE_SECONDS, status_line
from ..errors import ConfigError
from ._connection import (
    BODY,
    CLOSED,
    DRAIN,
    HANDSHAKE,
    HEAD,
    IDLE,
    INFINITY,
    LINGER,
    QUEUED,
    SCREEN,
    STREAM,
    WAITING,
    WORKING,
    WRITING,
    Connection,
    pending,
    tls_eof,
    would_block,
)
from ._head import MAX_HEAD_BYTES, Head, HttpError, parse_head
from ._poller import HUNG_UP, IN, OUT, RDHUP, Poller

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Iterable, Iterator, Optional
if TYPE_CHECKING:
    import signal
else:
    try:  # the C module: signal.py wraps every constant in an enum, which costs start-up
        import _signal as signal
    except ImportError:  # an interpreter without it (PyPy)
        import signal

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_QUEUED",
    "DEFAULT_MAX_REQUESTS",
    "DEFAULT_READ_TIMEOUT",
    "MAX_HEAD_BYTES",
    "HttpError",
    "parse_head",
    "serve_app",
    "tls_context",
]

DEFAULT_MAX_CONNECTIONS = 1024  # open connections; idle and slow ones cost a buffer, not a thread
DEFAULT_MAX_REQUESTS = 64  # requests running at once: the worker threads
DEFAULT_MAX_QUEUED = 256  # whole requests waiting for a worker; past them, 503
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # for an app without screen(): the most the server reads for it
DEFAULT_READ_TIMEOUT = 30.0  # seconds a client may idle on keep-alive, or take to send a body
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds from a request's first byte to the end of its head
MAX_DRAIN_BYTES = 64 * 1024  # a refused request's unread body up to this is skipped to keep the connection
# After an answer that leaves a body unread: the time the client has to send a small one (which is then
# skipped and the connection kept), or for the answer to reach it before the close.
LINGER_SECONDS = 2.0
RESERVED_FDS = 64  # descriptors RLIMIT_NOFILE keeps for all but connections: files, pipes, command tools
RETRY_AFTER_SECONDS = 1
# After a response, a worker waits this long for the same client's next request before it hands the
# connection to the loop: a keep-alive client's next request then costs no hand-off between threads.
KEEP_ALIVE_LINGER = 0.002
# A worker whose response fills the socket waits this long for the client to take more before it leaves
# the rest to the loop, and as long for more of an accepted body: a client that reads and sends at once
# (most) costs no hand-off between threads; one that stalls for longer is the loop's.
DELIVER_WAIT = 0.01
# When every connection is busy, how long a newcomer waits for one to start waiting: a connection that
# has just sent its answer is handed back a moment after its client can read it and connect again.
FULL_HOUSE_GRACE = 0.05
SWEEP_SECONDS = 0.25  # how often the loop looks for deadlines passed (and quiet push streams to poll)
SERVER_HEADER = f"mcpserver/{__version__}"

_WAKEUP_FD = -1  # the key, among the replaced signal handlers, of the wakeup fd that was set before

TOO_LARGE = "too large"  # not a state: what _next_step says of a head whose body exceeds max_body_bytes

_HEAD_END = re.compile(b"\r?\n\r?\n")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _print_exception() -> None:
    import traceback  # only when something went wrong: not at start-up

    traceback.print_exc()


class _Workers:
    """At most `limit` threads run requests; at most `queue_limit` requests wait for one."""

    def __init__(self, limit: int, queue_limit: int, run: Callable[[Any], None]):
        self.limit = limit
        self.queue_limit = queue_limit
        self._run = run
        self._changed = threading.Condition()
        self._jobs: deque[Any] = deque()
        self._threads = 0
        self._idle = 0

    def submit(self, job: Any) -> bool:
        """Run `job` on a worker, now or when one is free; False when the queue is full."""
        with self._changed:
            if self._idle > len(self._jobs):
                self._jobs.append(job)
                self._changed.notify()
                return True
            if self._threads < self.limit:
                self._threads += 1
                self._jobs.append(job)
                threading.Thread(target=self._serve, name="mcpserver-worker", daemon=True).start()
                return True
            if len(self._jobs) - self._idle >= self.queue_limit:
                return False
            self._jobs.append(job)
            return True

    @property
    def waiting(self) -> bool:
        """Whether a request waits for a worker (a worker then does not linger on an idle connection)."""
        return len(self._jobs) > self._idle

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._jobs:
                    self._idle += 1
                    self._changed.wait()
                    self._idle -= 1
                job = self._jobs.popleft()
            self._run(job)


class _Input:
    """wsgi.input: the body, read by the server before the app runs."""

    __slots__ = ("_data", "_offset")

    def __init__(self, data: bytes):
        self._data = data
        self._offset = 0

    def read(self, size: Optional[int] = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._offset + size
        chunk = self._data[self._offset:end]
        self._offset += len(chunk)
        return chunk

    def readline(self, size: Optional[int] = -1) -> bytes:
        end = self._data.find(b"\n", self._offset) + 1 or len(self._data)
        if size is not None and size >= 0:
            end = min(end, self._offset + size)
        chunk = self._data[self._offset:end]
        self._offset += len(chunk)
        return chunk

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")


def _unquote(path: str) -> str:
    if "%" not in path:
        return path
    from urllib.parse import unquote

    return unquote(path, "latin-1")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def _refusal(status: int, message: str, *extra: str) -> bytes:
    """A response the server writes itself (and then closes the connection)."""
    body = (message + "\n").encode()
    lines = [f"HTTP/1.1 {status_line(status)}", f"Server: {SERVER_HEADER}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(body)}", *extra, "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _response_head(head: Head, response: dict[str, Any], keep_alive: bool) -> tuple[bytes, bool, bool]:
    """(the status line and header fields, whether the body is chunked, whether the connection is kept)."""
    lines = [f"HTTP/1.1 {response['status']}", f"Server: {SERVER_HEADER}"]
    lines += [f"{name}: {value}" for name, value in response["headers"]]
    sized = any(name.lower() == "content-length" for name, _ in response["headers"])
    chunked = not sized and head.version == "1.1" and head.method != "HEAD"
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif not sized and head.method != "HEAD":
        keep_alive = False  # HTTP/1.0 and no length: the end of the body is the end of the connection
    if not keep_alive:
        lines.append("Connection: close")
    elif head.version == "1.0":
        lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), chunked, keep_alive


class _Server:
    """The listening socket, the loop that owns waiting connections, and the workers that run requests."""

    def __init__(self, app: Callable[..., Any], host: str, port: int, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_requests: int = DEFAULT_MAX_REQUESTS, max_queued: int = DEFAULT_MAX_QUEUED,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, read_timeout: float = DEFAULT_READ_TIMEOUT,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT, tls: Any = None):
        self.app = app
        self.screen: Optional[Callable[[dict[str, Any]], Any]] = getattr(app, "screen", None)
        self.tls = tls  # an ssl.SSLContext, or None for plain HTTP
        self.max_connections = max_connections
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout
        self.header_timeout = header_timeout
        self.sweep_seconds = min(SWEEP_SECONDS, read_timeout / 4, header_timeout / 4)
        self.would_block = would_block(tls is not None)
        self.tls_eof = tls_eof() if tls is not None else ()
        self.stopping = threading.Event()
        self.reload: Optional[tuple[str, Optional[str]]] = None  # (certificate, key) a SIGHUP asked to load
        self.lock = threading.Lock()  # the tables below, and the wake-up flag
        self.connections: dict[int, Connection] = {}  # by fd
        self.waiting: OrderedDict[Connection, None] = OrderedDict()  # reclaimable, longest-waiting first
        self.writers: OrderedDict[Connection, None] = OrderedDict()  # slow readers, longest-stalled first
        self._ready: list[Connection] = []  # push streams that called wake()
        self._closing: list[Connection] = []  # poll(): closes asked for off the loop
        self._admissions: deque[tuple[socket.socket, Any, float]] = deque()  # newcomers waiting for a place
        self._woken = False
        self._accept_paused = False
        self.listener = _listening_socket(host, port)
        self.host, self.port = str(self.listener.getsockname()[0]), int(self.listener.getsockname()[1])
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self.poller = Poller(self.wake)
        self.poller.watch(self.listener.fileno(), IN)
        self.poller.watch(self._wake_read, IN)
        self.workers = _Workers(max_requests, max_queued, self._work)

    # -- waking the loop --------------------------------------------------------------------------------

    def poke(self) -> None:
        """Wake the loop; safe in a signal handler (takes no lock)."""
        try:
            os.write(self._wake_write, b"!")
        except OSError:
            pass

    def wake(self) -> None:
        with self.lock:
            if self._woken:
                return
            self._woken = True
        self.poke()

    def _ready_now(self, conn: Connection) -> None:
        """A push stream's wake(): pump it on the loop soon (from any thread)."""
        with self.lock:
            if conn.ready:
                return
            conn.ready = True
            self._ready.append(conn)
            if self._woken:
                return
            self._woken = True
        self.poke()

    # -- the loop ---------------------------------------------------------------------------------------

    def run(self, grace_seconds: float, hurry: threading.Event) -> int:
        """Serve until `stopping`, then drain; return how many connections were still busy at the end."""
        self.poller.loop_thread = threading.get_ident()
        sweep_at, stop_at = 0.0, None
        while True:
            now = time.monotonic()
            timeout = max(0.0, min(sweep_at - now, self._admissions[0][2] - now if self._admissions else INFINITY))
            for fd, events in self.poller.poll(0.0 if self._ready else timeout):
                try:
                    self._event(fd, events)
                except Exception:  # a bug, ours or the interpreter's: that connection goes, everyone else stays
                    self._fault(fd)
            now = time.monotonic()
            if self._admissions:
                self._admit_waiting(now)
            if now >= sweep_at:
                self._sweep(now)
                sweep_at = now + self.sweep_seconds
            if self.stopping.is_set():
                if stop_at is None:
                    stop_at = self._begin_stop(now + grace_seconds)
                    sweep_at = now
                busy = self._close_waiting()
                if not busy or now >= stop_at or hurry.is_set():
                    return busy
                sweep_at = min(sweep_at, now + 0.05)

    def _fault(self, fd: int) -> None:
        # Found so: PyPy 7.3's ssl raises RuntimeError, not SSLError, for an error OpenSSL 3 gives no reason
        # string, and one TLS client's read took the whole server down.
        conn = self.connections.get(fd)
        if conn is not None:
            self._drop(conn)
        else:
            _print_exception()

    def _drop(self, conn: Connection) -> None:
        """The server's own bug while serving `conn`: logged, and that connection closed."""
        _print_exception()
        self._close(conn)

    def _event(self, fd: int, events: int) -> None:
        if fd == self._wake_read:
            self._woken_up()
            return
        conn = self.connections.get(fd)
        if conn is None:
            if fd == self.listener.fileno() and not self.stopping.is_set():
                self._accept()
            return
        state = conn.state
        if state in WAITING:
            self._readable(conn)
        elif state == WORKING:
            self._watched(conn, events)
        elif state == WRITING:
            self._writable(conn, events)
        elif state == STREAM:
            self._stream_event(conn, events)

    def _woken_up(self) -> None:
        try:
            os.read(self._wake_read, 4096)
        except OSError:
            pass
        with self.lock:
            self._woken = False
            ready, self._ready = self._ready, []
            closing, self._closing = self._closing, []
            for conn in ready:
                conn.ready = False
        for conn in closing:
            self._close(conn)
        if self.reload is not None:
            files, self.reload = self.reload, None
            self.reload_certificate(*files)
        for conn in ready:
            if conn.state == STREAM:
                self._pump(conn)

    def _sweep(self, now: float) -> None:
        """Deadlines: close what waited too long; poll push streams that have been quiet."""
        if self._accept_paused and not self.stopping.is_set():
            self._accept_paused = False
            self.poller.watch(self.listener.fileno(), IN)
        with self.lock:
            connections = list(self.connections.values())
        for conn in connections:
            state = conn.state
            if state == STREAM:
                if now >= conn.poll_at:
                    self._pump(conn)
            elif (state in WAITING or state == WRITING) and now >= conn.deadline:
                if state == HEAD and conn.buffer:
                    self._answer_and_close(conn, _refusal(408, f"The request head took longer than "
                                                               f"{self.header_timeout:g} s"))
                else:
                    self._close(conn)

    # -- accepting --------------------------------------------------------------------------------------

    def _accept(self) -> None:
        for _ in range(64):  # then the loop serves others; the listener stays readable
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno == errno.ECONNABORTED:  # the client gave up before it was accepted
                    continue
                self.poller.forget(self.listener.fileno())  # out of descriptors: again at the next sweep
                self._accept_paused = True
                return
            self._admit(sock, address, time.monotonic() + FULL_HOUSE_GRACE)

    def _admit(self, sock: socket.socket, address: Any, deadline: float) -> None:
        if len(self.connections) < self.max_connections or self._reclaim():
            self._open(sock, address)
        elif len(self._admissions) < 64 and not self.stopping.is_set():
            self._admissions.append((sock, address, deadline))  # a connection may start waiting within the grace
        else:
            _refuse_newcomer(sock, self.tls is None)

    def _admit_waiting(self, now: float) -> None:
        while self._admissions:
            sock, address, deadline = self._admissions[0]
            if len(self.connections) < self.max_connections or self._reclaim():
                self._admissions.popleft()
                self._open(sock, address)
            elif now >= deadline or self.stopping.is_set():
                self._admissions.popleft()
                _refuse_newcomer(sock, self.tls is None)
            else:
                return

    def _reclaim(self) -> bool:
        """Make room: close the connection that has waited longest, else the longest-stalled slow reader."""
        with self.lock:
            victim = next(iter(self.waiting), None) or next(iter(self.writers), None)
        if victim is None:
            return False
        self._close(victim)
        return True

    def _open(self, sock: socket.socket, address: Any) -> None:
        try:
            conn = Connection(sock, address, self.tls)
        except OSError:  # gone before it was set up
            sock.close()
            return
        with self.lock:
            self.connections[conn.fd] = conn
        self._enter(conn, conn.state, new=True)

    # -- a connection's moves -----------------------------------------------------------------------

    def _deadline(self, state: str, now: float) -> float:
        if state in (HANDSHAKE, HEAD):
            return now + self.header_timeout
        if state in (LINGER, DRAIN):  # the answer is out: what is left is a courtesy, kept short
            return now + LINGER_SECONDS
        if state in (IDLE, BODY, WRITING):
            return now + self.read_timeout
        return INFINITY

    def _enter(self, conn: Connection, state: str, mask: Optional[int] = IN, new: bool = False) -> None:
        """Hand `conn` to the loop in `state` (from the loop, or from the worker that had it), watched for
        `mask` (None: the caller arms it)."""
        now = time.monotonic()
        with conn.lock:
            if conn.state == CLOSED:
                return
            conn.deadline = self._deadline(state, now)
            with self.lock:
                if state in WAITING:
                    if conn not in self.waiting:
                        conn.waiting_since = now
                        self.waiting[conn] = None
                    self.writers.pop(conn, None)
                elif state == WRITING:
                    self.waiting.pop(conn, None)
                    self.writers[conn] = None
                else:
                    self.waiting.pop(conn, None)
                    self.writers.pop(conn, None)
                newcomers = bool(self._admissions)
            conn.state = state
            if new:
                self.poller.add(conn.fd, IN if mask is None else mask)
            elif mask is not None:
                self.poller.arm(conn.fd, mask)
        if newcomers and (state in WAITING or state == WRITING):
            self.wake()  # a newcomer waits for a place, and this one can now be reclaimed

    def _take(self, conn: Connection, state: str) -> None:
        """The loop gives `conn` to a worker (SCREEN or QUEUED): it no longer waits."""
        with conn.lock:
            conn.state = state
            with self.lock:
                self.waiting.pop(conn, None)

    def _close(self, conn: Connection) -> None:
        if not self.poller.closes_anywhere and threading.get_ident() != self.poller.loop_thread:
            with self.lock:
                self._closing.append(conn)
            self.wake()
            return
        with conn.lock:
            if conn.state == CLOSED:
                return
            conn.state = CLOSED
            with self.lock:
                if self.connections.get(conn.fd) is conn:
                    del self.connections[conn.fd]
                self.waiting.pop(conn, None)
                self.writers.pop(conn, None)
                newcomers = bool(self._admissions)
            self.poller.forget(conn.fd)
        stream, conn.stream = conn.stream, None
        if stream is not None:
            _close_result(stream)
        try:
            conn.sock.close()
        except OSError:
            pass
        if newcomers:
            self.wake()

    def _hung_up(self, conn: Connection) -> None:
        """The client is gone: tell whoever asked, and close unless a worker still has the connection."""
        with conn.lock:
            conn.gone = True
            callbacks, conn.callbacks = conn.callbacks, []
            state = conn.state
        for callback in callbacks:
            try:
                callback()
            except Exception:
                _print_exception()
        if state not in (SCREEN, QUEUED, WORKING):
            self._close(conn)

    # -- reading, on the loop ---------------------------------------------------------------------------

    def _readable(self, conn: Connection) -> None:
        if conn.state == HANDSHAKE:
            self._handshake(conn)
            return
        try:
            data, eof = conn.receive(self.would_block, self.tls_eof)
        except OSError:
            self._close(conn)
            return
        if conn.state == LINGER:  # an answer is out; what the client still sends is dropped
            if eof:
                self._close(conn)
            else:
                self.poller.arm(conn.fd, IN)
            return
        if conn.state == DRAIN:
            taken = min(conn.skip, len(data))
            conn.skip -= taken
            data = data[taken:]
            if conn.skip:
                self._close(conn) if eof else self.poller.arm(conn.fd, IN)
                return
            conn.state, conn.deadline = IDLE, time.monotonic() + self.read_timeout
        conn.buffer += data
        conn.peer_done = conn.peer_done or eof
        self._advance(conn)

    def _advance(self, conn: Connection) -> None:
        """What the buffer holds decides: wait for more, refuse, or hand the request to a worker."""
        try:
            step = self._next_step(conn)
        except HttpError as refused:
            self._answer_and_close(conn, _refusal(refused.status, refused.message))
            return
        if step == TOO_LARGE:
            assert conn.head is not None
            self._refused(conn, conn.head, self._too_large())
            return
        if step in (SCREEN, QUEUED):
            self._take(conn, step)
            if not self.workers.submit(conn):
                self._answer_and_close(conn, _refusal(503, "Too many requests in progress; try again",
                                                      f"Retry-After: {RETRY_AFTER_SECONDS}"))
            return
        if conn.peer_done:  # the client sends no more, and what it sent is not a whole request
            self._close(conn)
        elif step == BODY and conn.state != BODY:
            if conn.head is not None and conn.head.expect_continue:
                self._send_quietly(conn, _CONTINUE)
            self._enter(conn, BODY)
        elif conn.state == IDLE and conn.buffer:
            self._enter(conn, HEAD)  # its first byte: the head's deadline starts now
        else:
            self.poller.arm(conn.fd, IN)

    def _next_step(self, conn: Connection) -> Optional[str]:
        """SCREEN or QUEUED when a request can go to a worker, BODY while its body is on the way, None
        while its head is; HttpError for a head the server refuses itself."""
        if conn.head is None:
            buffer = conn.buffer
            if buffer.startswith((b"\r", b"\n")):  # RFC 9112 §2.2: empty lines before a request are skipped
                del buffer[:len(buffer) - len(buffer.lstrip(b"\r\n"))]
                conn.searched = 0
            # From just before where the last search ended: a head trickling in is not searched again whole.
            end = _HEAD_END.search(buffer, max(0, conn.searched - 3), MAX_HEAD_BYTES + 4)
            if end is None:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise HttpError(431, f"Request head larger than {MAX_HEAD_BYTES} bytes")
                conn.searched = len(buffer)
                return None
            head = parse_head(bytes(buffer[:end.start()]))
            del buffer[:end.end()]
            conn.searched = 0
            conn.head, conn.environ = head, None
            if self.screen is not None:
                return SCREEN
            if head.length > self.max_body_bytes:  # with screen(), the app's own bound is asked first
                return TOO_LARGE
        return QUEUED if len(conn.buffer) >= conn.head.length else BODY

    def _handshake(self, conn: Connection) -> None:
        import ssl

        if not isinstance(conn.sock, ssl.SSLSocket):
            try:
                first = conn.sock.recv(1, socket.MSG_PEEK)
            except self.would_block:
                self.poller.arm(conn.fd, IN)
                return
            except OSError:
                first = b""
            if not first:
                self._close(conn)
                return
            if first.isalpha():  # a TLS handshake starts with byte 0x16; this is a plain-HTTP request
                try:  # taken, so closing with it unread does not reset the answer away
                    conn.sock.recv(MAX_HEAD_BYTES)
                except OSError:
                    pass
                self._answer_and_close(conn, _refusal(400, "This port speaks HTTPS: use https://"))
                return
            conn.sock = conn.tls.wrap_socket(conn.sock, server_side=True, do_handshake_on_connect=False)
        tls_sock: Any = conn.sock
        try:
            tls_sock.do_handshake()
        except ssl.SSLWantReadError:
            self.poller.arm(conn.fd, IN)
            return
        except ssl.SSLWantWriteError:
            self.poller.arm(conn.fd, OUT)
            return
        except OSError:  # ssl.SSLError included: a failed handshake
            self._close(conn)
            return
        conn.state, conn.deadline = IDLE, time.monotonic() + self.read_timeout
        self._readable(conn)  # a request may have come with the handshake's last flight

    # -- a request on a worker, watched by the loop -----------------------------------------------------

    def _watch(self, conn: Connection, callback: Callable[[], None]) -> None:
        """environ["mcpserver.on_disconnect"]: the first callback starts the loop's watch on the socket."""
        with conn.lock:
            if not conn.gone:
                conn.callbacks.append(callback)
                if len(conn.callbacks) == 1 and conn.state == WORKING:
                    self.poller.arm(conn.fd, 0 if conn.probed else RDHUP)
                return
        callback()

    def _watched(self, conn: Connection, events: int) -> None:
        if events & HUNG_UP:
            self._hung_up(conn)
            return
        if not events & RDHUP:
            return
        # A FIN: the client sends no more, yet may still read. An interim 100 (RFC 9110 §15.2, skipped by
        # every client) is something a peer that is really gone answers with an RST: the watch sees that.
        with conn.lock:
            if conn.state != WORKING:
                return
            conn.probed = conn.peer_done = True
            if conn.callbacks and not conn.started and conn.head is not None and conn.head.version == "1.1":
                self._send_quietly(conn, _CONTINUE)
            self.poller.arm(conn.fd, 0)

    def _send_quietly(self, conn: Connection, data: bytes) -> None:
        """A few bytes into an empty send buffer, from the loop: it takes them, or the client is gone."""
        try:
            conn.sock.send(data)
        except OSError:
            pass

    # -- writing, on the loop ---------------------------------------------------------------------------

    def _flush(self, conn: Connection) -> bool:
        """Write what the socket takes of `out`; True once all of it is written. OSError if the client is gone."""
        out = conn.out
        view = memoryview(out)
        try:
            while conn.sent < len(out):
                sent = conn.send_some(view[conn.sent:], self.would_block)
                if not sent:
                    break
                conn.sent += sent
                conn.deadline = time.monotonic() + self.read_timeout  # progress: the slow reader's clock starts again
        finally:
            view.release()
        if conn.sent < len(out):
            return False
        conn.out, conn.sent = bytearray(), 0
        return True

    def _queue(self, conn: Connection, data: bytes) -> None:
        if conn.sent:
            del conn.out[:conn.sent]
            conn.sent = 0
        conn.out += data

    def _writable(self, conn: Connection, events: int) -> None:
        if events & HUNG_UP:
            self._close(conn)
        else:
            self._write_out(conn, conn.after)

    def _write_out(self, conn: Connection, after: str) -> None:
        """Write `out`, then go where `after` says; what the socket does not take now, the loop writes
        as the client reads (from the loop, or from a worker that goes free)."""
        try:
            done = self._flush(conn)
        except OSError:
            self._close(conn)
            return
        if done:
            self._then(conn, after)
        elif conn.state == WRITING:
            self.poller.arm(conn.fd, conn.want)
        else:
            conn.after = after
            self._enter(conn, WRITING, conn.want)

    def _then(self, conn: Connection, after: str) -> None:
        """Where a connection goes once its response is out (on the loop)."""
        self._request_done(conn)
        if after == CLOSED or (after == IDLE and (conn.gone or self.stopping.is_set())):
            self._close(conn)
        elif after == LINGER:
            _shut_writing(conn)
            self._enter(conn, LINGER)
        elif after == DRAIN:
            self._enter(conn, DRAIN)
        else:
            conn.waiting_since = time.monotonic()
            self._enter(conn, IDLE, None)
            self._advance(conn)  # a pipelined request may be in the buffer already: it arms what it needs

    def _request_done(self, conn: Connection) -> None:
        with conn.lock:
            conn.callbacks = []
            conn.head = conn.environ = None
            conn.started = False

    def _answer_and_close(self, conn: Connection, data: bytes) -> None:
        """A response the server writes itself, then a lingering close (loop or worker)."""
        self._request_done(conn)
        conn.out, conn.sent = bytearray(data), 0
        self._write_out(conn, LINGER)

    # -- push streams, on the loop ----------------------------------------------------------------------

    def _pump(self, conn: Connection) -> None:
        """Ask a push stream for its next piece, unless its client has not taken the last one yet."""
        if conn.broken:
            self._close(conn)
            return
        conn.poll_at = time.monotonic() + conn.interval
        while not conn.out and conn.state == STREAM:  # until it has nothing more, or its client is full
            try:
                piece = next(conn.stream)
            except StopIteration:
                self._stream_over(conn)
                return
            except Exception:
                self._drop(conn)
                return
            if not piece:
                return
            self._stream_send(conn, self._stream_head(conn) + (_chunk(piece) if conn.chunked else piece))

    def _stream_head(self, conn: Connection) -> bytes:
        if conn.head_sent:
            return b""
        conn.head_sent = True
        assert conn.head is not None
        data, conn.chunked, conn.keep_alive = _response_head(conn.head, conn.response, conn.keep_alive)
        with conn.lock:
            conn.started = True
        return data

    def _stream_send(self, conn: Connection, data: bytes) -> None:
        self._queue(conn, data)
        try:
            done = self._flush(conn)
        except OSError:
            self._hung_up(conn)
            return
        self.poller.arm(conn.fd, (0 if done else conn.want) | (0 if conn.probed else RDHUP))

    def _stream_event(self, conn: Connection, events: int) -> None:
        if events & HUNG_UP:
            self._hung_up(conn)
            return
        probe = b""
        if events & RDHUP and not conn.probed:  # a half-close: find out whether the client still reads
            conn.probed = conn.peer_done = True
            if not conn.head_sent:
                probe = _CONTINUE if conn.head is not None and conn.head.version == "1.1" else b""
            elif conn.chunked:
                probe = _chunk(getattr(conn.stream, "probe", b""))
        self._stream_send(conn, probe)
        if not conn.out and conn.state == STREAM:
            self._pump(conn)  # it was held back while the client had not taken the last piece

    def _stream_over(self, conn: Connection) -> None:
        data = self._stream_head(conn) + (b"0\r\n\r\n" if conn.chunked else b"")
        stream, conn.stream = conn.stream, None
        _close_result(stream)
        self._queue(conn, data)
        self._write_out(conn, IDLE if conn.keep_alive and not conn.peer_done else CLOSED)

    # -- on a worker ------------------------------------------------------------------------------------

    def _work(self, conn: Connection) -> None:
        """A worker's job: screen and run the connection's request, and the next ones it has sent already."""
        try:
            step: Optional[str] = conn.state
            while step in (SCREEN, QUEUED):
                if step == SCREEN:
                    step = self._screen(conn)
                if step == QUEUED:
                    step = self._respond(conn)
        except Exception:  # the server's own bug: the connection goes, the worker stays
            self._drop(conn)

    def _screen(self, conn: Connection) -> Optional[str]:
        assert self.screen is not None and conn.head is not None
        head = conn.head
        environ = conn.environ = self._environ(conn, head)
        try:
            refusal = self.screen(environ)
        except Exception:
            return self._failed(conn)
        if refusal is not None:
            return self._refused(conn, head, refusal)
        if head.length > self.max_body_bytes:
            return self._refused(conn, head, self._too_large())
        if head.expect_continue and len(conn.buffer) < head.length:
            self._send_quietly(conn, _CONTINUE)
        if self._body_soon(conn, head.length):
            return QUEUED
        if conn.peer_done:
            self._close(conn)
            return None
        self._enter(conn, BODY)
        return None

    def _body_soon(self, conn: Connection, length: int) -> bool:
        """Whether the whole body is in, reading on while it keeps coming within DELIVER_WAIT: an accepted
        body that streams in (some of it came with the head) needs no hand-off to the loop and back; one
        that has not started, or stalls, is the loop's, so a slow body never holds a worker."""
        if not conn.buffer:
            return length <= 0
        while len(conn.buffer) < length and not conn.peer_done:
            if not (conn.tls is not None and pending(conn.sock)) and not self._readable_soon(conn):
                return False
            try:
                data, eof = conn.receive(self.would_block, self.tls_eof)
            except OSError:
                conn.peer_done = True
                return False
            conn.buffer += data
            conn.peer_done = eof
        return len(conn.buffer) >= length

    def _too_large(self) -> tuple[str, list[tuple[str, str]], bytes]:
        body = f"The body is larger than {self.max_body_bytes} bytes\n".encode()
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        return status_line(413), headers, body

    def _refused(self, conn: Connection, head: Head, refusal: Any) -> Optional[str]:
        """Answer what screen() said; the body is not waited for: skipped if small, else the connection closes."""
        status, headers, body = refusal
        unread = head.length - len(conn.buffer)
        keep = (head.keep_alive and not conn.peer_done and not self.stopping.is_set()
                and unread <= MAX_DRAIN_BYTES)
        data, _, keep = _response_head(head, {"status": status, "headers": headers}, keep)
        if unread > 0:
            conn.buffer.clear()
            conn.skip = unread
        else:
            del conn.buffer[:head.length]
        after = (DRAIN if unread > 0 else IDLE) if keep else (LINGER if unread > 0 else CLOSED)
        return self._deliver(conn, [data, body if head.method != "HEAD" else b""], after)

    def _respond(self, conn: Connection) -> Optional[str]:
        """Run the app for the request and start its response."""
        head = conn.head
        assert head is not None
        environ = conn.environ or self._environ(conn, head)
        if head.length >= LARGE_BYTES:
            return_large_buffers()
        if len(conn.buffer) == head.length:
            body, conn.buffer = bytes(conn.buffer), bytearray()
        else:
            body = bytes(conn.buffer[:head.length])
            del conn.buffer[:head.length]
        environ["wsgi.input"] = _Input(body)
        response: dict[str, Any] = {}
        conn.response = response

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            response["status"], response["headers"] = status, headers
            return lambda data: None

        with conn.lock:  # a FIN that came with the request is still seen by the watch, and probed
            conn.state, conn.started, conn.probed = WORKING, False, False
        try:
            result = self.app(environ, start_response)
        except Exception:  # the app's own bug: answer for it, and say so where the app logs
            return self._failed(conn)
        keep = head.keep_alive and not conn.peer_done and not self.stopping.is_set()
        if hasattr(result, "on_ready"):
            self._push(conn, result, keep)
            return None
        return self._write(conn, head, result, keep)

    def _failed(self, conn: Connection) -> Optional[str]:
        """The app raised: say so where it logs, and answer 500 if nothing of the response went out yet."""
        _print_exception()
        if conn.started:
            self._close(conn)
        else:
            self._answer_and_close(conn, _refusal(500, "Internal server error"))
        return None

    def _write(self, conn: Connection, head: Head, result: Iterable[bytes], keep: bool) -> Optional[str]:
        try:
            chunks = iter(result)
            first = next(chunks, b"")  # start_response has been called once the first piece exists
        except Exception:
            _close_result(result)
            return self._failed(conn)
        data, chunked, keep = _response_head(head, conn.response, keep)
        after = IDLE if keep else CLOSED
        frame = _chunk if chunked else bytes
        if head.method == "HEAD" or (isinstance(result, (list, tuple)) and len(result) <= 1):
            _close_result(result)  # the whole response is known: what the socket does not take, the loop writes
            body = b"" if head.method == "HEAD" else frame(first)
            return self._deliver(conn, [data, body, b"0\r\n\r\n" if chunked and body else b""], after)
        with conn.lock:
            conn.started = True
        try:  # an iterable that makes its pieces as it goes: written, blocking, piece by piece
            self._send_blocking(conn, data + frame(first))
            for piece in chunks:
                if piece:
                    self._send_blocking(conn, frame(piece))
            if chunked:
                self._send_blocking(conn, b"0\r\n\r\n")
        except OSError:
            self._close(conn)
            return None
        finally:
            _close_result(result)
        return self._after(conn, after)

    def _deliver(self, conn: Connection, parts: list[bytes], after: str) -> Optional[str]:
        """Send a whole response: what the socket takes now, the rest by the loop (the worker goes free)."""
        with conn.lock:
            conn.started = True
        size = sum(len(part) for part in parts)
        if size < 65536:  # one send, one segment, for the common case
            parts = [b"".join(parts)]
        elif size >= LARGE_BYTES:
            return_large_buffers()
        try:
            for index, part in enumerate(parts):
                sent = 0
                while sent < len(part):
                    taken = conn.send_some(memoryview(part)[sent:], self.would_block)
                    if not taken and not self._writable_soon(conn):  # a slow reader: the loop writes the rest
                        conn.out = bytearray(memoryview(part)[sent:]) + b"".join(parts[index + 1:])
                        conn.sent, conn.after = 0, after
                        self._enter(conn, WRITING, conn.want)
                        return None
                    sent += taken
        except OSError:
            self._close(conn)
            return None
        return self._after(conn, after)

    def _writable_soon(self, conn: Connection) -> bool:
        """Whether the socket takes more within DELIVER_WAIT: a client that reads at once costs no hand-off
        (never on the loop, which must not wait)."""
        return self._ready_soon(conn, select.POLLIN if conn.want == IN else select.POLLOUT)

    def _readable_soon(self, conn: Connection) -> bool:
        return self._ready_soon(conn, select.POLLIN)

    def _ready_soon(self, conn: Connection, event: int) -> bool:
        if threading.get_ident() == self.poller.loop_thread:
            return False
        poll = select.poll()
        poll.register(conn.fd, event)
        return bool(poll.poll(DELIVER_WAIT * 1000))

    def _after(self, conn: Connection, after: str) -> Optional[str]:
        """The response is out (on the worker): the next request, here if it has come, else to the loop."""
        if threading.get_ident() == self.poller.loop_thread:  # the server's own answer, from the loop
            self._then(conn, after)
            return None
        if after != IDLE or conn.gone or self.stopping.is_set():
            self._then(conn, CLOSED if after == IDLE else after)
            return None
        self._request_done(conn)
        conn.waiting_since = time.monotonic()
        if not conn.buffer and not conn.peer_done and self._may_linger():
            self._linger(conn)
        try:
            step = self._next_step(conn)
        except HttpError as refused:
            self._answer_and_close(conn, _refusal(refused.status, refused.message))
            return None
        if step == TOO_LARGE:
            assert conn.head is not None
            return self._refused(conn, conn.head, self._too_large())
        if step in (SCREEN, QUEUED):
            return step
        if conn.peer_done:
            self._close(conn)
        elif step == BODY:
            if conn.head is not None and conn.head.expect_continue:
                self._send_quietly(conn, _CONTINUE)
            self._enter(conn, BODY)
        else:
            self._enter(conn, HEAD if conn.buffer else IDLE)
        return None

    def _may_linger(self) -> bool:
        """A lingering worker keeps an idle connection out of reach: not while a request waits for a
        worker, nor at the connection bound, where a newcomer may need that connection's place."""
        return not (self.workers.waiting or self._admissions or len(self.connections) >= self.max_connections)

    def _linger(self, conn: Connection) -> None:
        """Wait a moment for a keep-alive client's next request, so it needs no hand-off to the loop and back."""
        if conn.tls is None or not pending(conn.sock):
            poll = select.poll()
            poll.register(conn.fd, select.POLLIN)
            if not poll.poll(KEEP_ALIVE_LINGER * 1000):
                return
        try:
            data, eof = conn.receive(self.would_block, self.tls_eof)
        except OSError:
            conn.gone = conn.peer_done = True
            return
        conn.buffer += data
        conn.peer_done = conn.peer_done or eof

    def _send_blocking(self, conn: Connection, data: bytes) -> None:
        """Send all of `data` from a worker, waiting while the socket is full; socket.timeout after
        read_timeout without progress."""
        view, sent = memoryview(data), 0
        deadline = time.monotonic() + self.read_timeout
        while sent < len(data):
            taken = conn.send_some(view[sent:], self.would_block)
            if taken:
                sent += taken
                deadline = time.monotonic() + self.read_timeout
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("the client stopped reading")
            poll = select.poll()
            poll.register(conn.fd, select.POLLIN if conn.want == IN else select.POLLOUT)
            poll.poll(left * 1000)

    def _push(self, conn: Connection, result: Any, keep: bool) -> None:
        """Hand a push stream to the loop, then give it this worker for its own work."""
        interval = getattr(result, "poll_interval", None)
        conn.interval = float(interval) if interval else INFINITY
        conn.poll_at = time.monotonic() + conn.interval
        conn.stream, conn.keep_alive, conn.head_sent, conn.chunked = result, keep, False, False
        with conn.lock:
            if conn.state == CLOSED:
                return
            conn.state = STREAM
            self.poller.arm(conn.fd, 0 if conn.probed else RDHUP)
        try:
            result.on_ready(lambda: self._ready_now(conn))
        except Exception:
            _print_exception()
            conn.broken = True
            self._ready_now(conn)

    def _environ(self, conn: Connection, head: Head) -> dict[str, Any]:
        path, _, query = head.target.partition("?")
        if path.startswith(("http://", "https://")):  # absolute-form: what a proxy sends
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        content_type = content_length = ""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": head.method, "SCRIPT_NAME": "", "PATH_INFO": _unquote(path),
            "QUERY_STRING": query, "RAW_URI": head.target, "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port), "SERVER_PROTOCOL": "HTTP/" + head.version,
            "REMOTE_ADDR": str(conn.address[0]) if conn.address else "", "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if conn.tls is not None else "http", "wsgi.input": _Input(b""),
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
            "mcpserver.headers": head.headers, "mcpserver.push": True,
            "mcpserver.on_disconnect": lambda callback: self._watch(conn, callback),
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

    # -- stopping ---------------------------------------------------------------------------------------

    def _begin_stop(self, deadline: float) -> float:
        """Stop accepting and let the app end its long streams; the drain then has until `deadline`."""
        self.poller.forget(self.listener.fileno())
        self.listener.close()
        while self._admissions:
            self._admissions.popleft()[0].close()
        shutdown = getattr(self.app, "shutdown", None)
        if shutdown is not None:  # long-lived streams (subscriptions) end now, so the drain need not wait
            try:
                shutdown()
            except Exception:
                _print_exception()
        return deadline

    def _close_waiting(self) -> int:
        """Close every connection that waits; return how many are still busy."""
        with self.lock:
            waiting = list(self.waiting)
        for conn in waiting:
            self._close(conn)
        with self.lock:
            return len(self.connections)

    def reload_certificate(self, cert: str, key: Optional[str]) -> None:
        """Load the certificate again for connections accepted from now on; keep the current one if it fails."""
        try:
            self.tls = tls_context(cert, key)
            print("mcpserver: SIGHUP: TLS certificate reloaded", file=sys.stderr, flush=True)
        except ConfigError as exc:
            print(f"mcpserver: SIGHUP: keeping the current TLS certificate: {exc}", file=sys.stderr, flush=True)


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(1024)
        listener.setblocking(False)  # accept after poll: a client that gave up must not block it
    except OSError:
        listener.close()
        raise
    return listener


def _refuse_newcomer(sock: socket.socket, plain: bool) -> None:
    """Every connection runs a request or a stream: say so (a TLS client could not read it) and close."""
    try:
        if plain:
            sock.setblocking(False)
            sock.send(_refusal(503, "Too many connections", f"Retry-After: {RETRY_AFTER_SECONDS}"))
    except OSError:
        pass
    sock.close()


def _shut_writing(conn: Connection) -> None:
    """The answer is out: a FIN after it, while what the client still sends is read and dropped (closing
    with unread data would send an RST, which can destroy the answer before the client reads it)."""
    try:
        socket.socket.shutdown(conn.sock, socket.SHUT_WR)
    except OSError:
        pass


def _close_result(result: Any) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            _print_exception()


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


def fit_connections(wanted: int) -> int:
    """`wanted` connections, or as many as RLIMIT_NOFILE allows (its soft limit raised toward the hard one
    first), keeping RESERVED_FDS and the newcomers' queue for everything else."""
    try:
        import resource
    except ImportError:  # not a Unix: no such limit to read
        return wanted
    needed = wanted + RESERVED_FDS + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    return max(1, soft - RESERVED_FDS - 64)


def _handle_signals(server: _Server, hurry: threading.Event, tls_cert: Optional[str],
                    tls_key: Optional[str]) -> dict[int, Any]:
    """SIGTERM/SIGINT stop the server (a second one: at once); with TLS, SIGHUP loads the certificate
    again. Returns the handlers replaced, to put back."""
    def on_signal(signum: int, frame: Any) -> None:
        if server.stopping.is_set():
            hurry.set()  # a second signal: stop waiting for requests in flight
        server.stopping.set()
        server.poke()

    def reload_certificate(signum: int, frame: Any) -> None:
        # Only a note for the loop: a handler that printed could land inside another print to stderr (the
        # banner, a log line) and die of a reentrant call, taking the server with it.
        server.reload = (tls_cert or "", tls_key)
        server.poke()

    previous: dict[int, Any] = {}
    handlers = [(signal.SIGTERM, on_signal), (signal.SIGINT, on_signal)]
    if server.tls is not None:
        handlers.append((signal.SIGHUP, reload_certificate))
    for signum, handler in handlers:
        try:
            previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: the embedding application owns signals
            pass
    if previous:  # a signal the kernel hands to another thread still wakes the loop's poll()
        previous[_WAKEUP_FD] = signal.set_wakeup_fd(server._wake_write)
    return previous


def serve_app(app: Callable[..., Any], *, host: str, port: int, banner: Callable[[str, int], None],
              max_connections: int = DEFAULT_MAX_CONNECTIONS, max_requests: int = DEFAULT_MAX_REQUESTS,
              max_queued: int = DEFAULT_MAX_QUEUED, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              read_timeout: float = DEFAULT_READ_TIMEOUT, header_timeout: float = DEFAULT_HEADER_TIMEOUT,
              grace_seconds: float = DEFAULT_GRACE_SECONDS, tls_cert: Optional[str] = None,
              tls_key: Optional[str] = None) -> int:
    """Serve a WSGI app until SIGTERM/SIGINT; `banner(host, port)` is called once listening. Returns 0.
    With `tls_cert` (and `tls_key`, unless the key is in the same file) it serves HTTPS."""
    for name, value in (("max_connections", max_connections), ("max_requests", max_requests),
                        ("max_body_bytes", max_body_bytes), ("read_timeout", read_timeout),
                        ("header_timeout", header_timeout)):
        if not value > 0:
            raise ConfigError(f"{name} must be positive, not {value!r}")
    if max_queued < 0:
        raise ConfigError(f"max_queued must not be negative, not {max_queued!r}")
    if tls_key and not tls_cert:
        raise ConfigError("a TLS key without a certificate: give --tls-cert too")
    tls = tls_context(tls_cert, tls_key) if tls_cert else None
    fitted = fit_connections(max_connections)
    if fitted < max_connections:
        print(f"mcpserver: serving at most {fitted} connections, not {max_connections}: the limit on open "
              "files (ulimit -n) allows no more", file=sys.stderr, flush=True)
    threading.stack_size(THREAD_STACK_BYTES)
    try:
        server = _Server(app, host, port, max_connections=fitted, max_requests=max_requests, max_queued=max_queued,
                         max_body_bytes=max_body_bytes, read_timeout=read_timeout, header_timeout=header_timeout,
                         tls=tls)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    hurry = threading.Event()
    previous = _handle_signals(server, hurry, tls_cert, tls_key)
    banner(server.host, server.port)  # after the handlers: a signal sent once the banner is seen is handled
    try:
        left = server.run(grace_seconds, hurry)
        if left:
            print(f"mcpserver: exiting with {left} request(s) still running after the grace period", file=sys.stderr)
    finally:
        for number, previous_handler in previous.items():
            if number == _WAKEUP_FD:
                signal.set_wakeup_fd(previous_handler)
            else:
                signal.signal(number, previous_handler)
    return 0
