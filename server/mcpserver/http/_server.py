"""The built-in HTTP/1.1 server: any WSGI app, from one event loop and a bounded pool of workers
(docs/adr/0004-our-own-http-server.md says why it is ours, and why it is built this way).

The server, by role (each module's docstring states its rules):
  _head        a request head, parsed strictly (RFC 9112): no socket, no state
  _poller      readiness: epoll with EPOLLONESHOT, or poll() where there is none
  _connection  one client connection: its socket, its buffers, its state (which says who owns it)
  _accepting   the door: the listening socket, the bound on connections, TLS for new ones
  _loop        the loop thread: owns every connection not running a request, its moves and deadlines
  _reading     a request coming in: handshake, head, body (on the loop; briefly on a worker)
  _writing     a response going out: what the socket takes now, the rest by the loop; what comes after it
  _pushing     push streams, driven by the loop without a thread
  _working     the workers: screen the request, run the app, start its response, take the next request
  _server      this module: the roles built and joined, serve_app, signals, the limits' defaults

Rules of this module:
- It knows no MCP. It serves one WSGI app and offers it, beyond WSGI: environ["mcpserver.headers"],
  environ["mcpserver.on_disconnect"], the app's `screen(environ)` and push streams (environ["mcpserver.push"]).
- Each role is built with its own settings and state, then given the roles it calls (its join()): they call
  one another in a cycle (a response out leads to the next request; a request may be answered before it
  runs), always by name, `self.writer.deliver(...)`, so each call site says which role does what.
- SIGTERM/SIGINT: stop accepting, close connections that wait, call the app's `shutdown()` if it has one
  (streams end), let requests in flight finish within grace_seconds, exit 0 (also as PID 1). A second
  signal ends the wait at once. With TLS, SIGHUP loads the certificate again (the _accepting module); the
  handler only leaves a note for the loop.
- At most max_connections, lowered to what RLIMIT_NOFILE allows (its soft limit raised toward the hard one
  first), keeping RESERVED_FDS and the newcomers' queue for everything else.
"""

from __future__ import annotations

import sys
import threading

from .._json import THREAD_STACK_BYTES
from .._latch import Latch
from .._wire import DEFAULT_GRACE_SECONDS
from ..errors import ConfigError
from ._accepting import Acceptor, tls_context
from ._connection import tls_eof, would_block
from ._head import MAX_HEAD_BYTES, HttpError, parse_head
from ._loop import Loop
from ._pushing import Pusher
from ._reading import Reader
from ._working import DEFAULT_IDLE_SECONDS, Worker
from ._writing import Writer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional
if TYPE_CHECKING:
    import signal
else:
    try:  # the C module: signal.py wraps every constant in an enum, which costs start-up
        import _signal as signal
    except ImportError:  # an interpreter without it (PyPy)
        import signal

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_IDLE_SECONDS",
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
RESERVED_FDS = 64  # descriptors RLIMIT_NOFILE keeps for all but connections: files, pipes, command tools

_WAKEUP_FD = -1  # the key, among the replaced signal handlers, of the wakeup fd that was set before


class _Server:
    """One server's roles, built and joined. The listening socket is opened first: a port that cannot be had
    fails before anything else is made."""

    def __init__(self, app: Callable[..., Any], host: str, port: int, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_requests: int = DEFAULT_MAX_REQUESTS, max_queued: int = DEFAULT_MAX_QUEUED,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, read_timeout: float = DEFAULT_READ_TIMEOUT,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT, worker_idle_seconds: float = DEFAULT_IDLE_SECONDS,
                 tls: Any = None):
        blocking = would_block(tls is not None)
        self.acceptor = Acceptor(host, port, max_connections=max_connections, tls=tls)
        self.loop = Loop(read_timeout=read_timeout, header_timeout=header_timeout)
        self.worker = Worker(app, host=self.acceptor.host, port=self.acceptor.port, max_requests=max_requests,
                             max_queued=max_queued, max_body_bytes=max_body_bytes, idle_seconds=worker_idle_seconds)
        self.reader = Reader(screening=self.worker.screen is not None, max_body_bytes=max_body_bytes,
                             read_timeout=read_timeout, would_block=blocking,
                             tls_eof=tls_eof() if tls is not None else ())
        self.writer = Writer(max_body_bytes=max_body_bytes, read_timeout=read_timeout, would_block=blocking)
        self.pusher = Pusher()
        self.acceptor.join(self.loop)
        self.loop.join(self.acceptor, self.reader, self.writer, self.pusher, self.worker)
        self.reader.join(self.loop, self.writer, self.worker.workers)
        self.writer.join(self.loop, self.reader, self.worker)
        self.pusher.join(self.loop, self.writer)
        self.worker.join(self.loop, self.acceptor, self.reader, self.writer, self.pusher)


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


def _handle_signals(loop: Loop, tls: bool, hurry: Latch, tls_cert: Optional[str],
                    tls_key: Optional[str]) -> dict[int, Any]:
    """SIGTERM/SIGINT stop the server (a second one: at once); with TLS, SIGHUP loads the certificate
    again. Returns the handlers replaced, to put back."""
    def on_signal(signum: int, frame: Any) -> None:
        if loop.stopping.is_set():
            hurry.set()  # a second signal: stop waiting for requests in flight
        loop.stopping.set()
        loop.poke()

    def reload_certificate(signum: int, frame: Any) -> None:
        # Only a note for the loop: a handler that printed could land inside another print to stderr (the
        # banner, a log line) and die of a reentrant call, taking the server with it.
        loop.reload = (tls_cert or "", tls_key)
        loop.poke()

    previous: dict[int, Any] = {}
    handlers = [(signal.SIGTERM, on_signal), (signal.SIGINT, on_signal)]
    if tls:
        handlers.append((signal.SIGHUP, reload_certificate))
    for signum, handler in handlers:
        try:
            previous[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: the embedding application owns signals
            pass
    if previous:  # a signal the kernel hands to another thread still wakes the loop's poll()
        previous[_WAKEUP_FD] = signal.set_wakeup_fd(loop.wake_fd)
    return previous


def serve_app(app: Callable[..., Any], *, host: str, port: int, banner: Callable[[str, int], None],
              max_connections: int = DEFAULT_MAX_CONNECTIONS, max_requests: int = DEFAULT_MAX_REQUESTS,
              max_queued: int = DEFAULT_MAX_QUEUED, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              read_timeout: float = DEFAULT_READ_TIMEOUT, header_timeout: float = DEFAULT_HEADER_TIMEOUT,
              grace_seconds: float = DEFAULT_GRACE_SECONDS, tls_cert: Optional[str] = None,
              tls_key: Optional[str] = None, worker_idle_seconds: float = DEFAULT_IDLE_SECONDS) -> int:
    """Serve a WSGI app until SIGTERM/SIGINT; `banner(host, port)` is called once listening. Returns 0.
    With `tls_cert` (and `tls_key`, unless the key is in the same file) it serves HTTPS. A worker idle for
    `worker_idle_seconds` exits (the _working module keeps a few)."""
    for name, value in (("max_connections", max_connections), ("max_requests", max_requests),
                        ("max_body_bytes", max_body_bytes), ("read_timeout", read_timeout),
                        ("header_timeout", header_timeout), ("worker_idle_seconds", worker_idle_seconds)):
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
                         worker_idle_seconds=worker_idle_seconds, tls=tls)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    hurry = Latch()
    previous = _handle_signals(server.loop, tls is not None, hurry, tls_cert, tls_key)
    starting = getattr(previous.get(signal.SIGTERM), "served", None)
    if starting is not None:  # the command line's start-up handler (mcpserver.__main__): serving begins here
        starting()
    banner(server.acceptor.host, server.acceptor.port)  # after the handlers: a signal once it is seen is handled
    try:
        left = server.loop.run(grace_seconds, hurry)
        if left:
            print(f"mcpserver: exiting with {left} request(s) still running after the grace period", file=sys.stderr)
    finally:
        for number, previous_handler in previous.items():
            if number == _WAKEUP_FD:
                signal.set_wakeup_fd(previous_handler)
            else:
                signal.signal(number, previous_handler)
    return 0
