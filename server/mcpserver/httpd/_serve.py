"""The built-in HTTP/1.1 server: any WSGI app, from one event loop and a bounded pool of workers
(docs/adr/0004-our-own-http-server.md says why it is ours, and why it is built this way; docs/adr/0019 why it is a
machine and two drivers).

Rules of this module:
- It knows no MCP. It serves one WSGI app and offers it, beyond WSGI: environ["mcpserver.headers"],
  environ["mcpserver.on_disconnect"], the app's `screen(environ)` and push streams (environ["mcpserver.push"]).
- It builds the server: the door (the listening socket, opened first: a port that cannot be had fails before
  anything else is made), the loop and the workers. Each is given what it uses of the others, as callables,
  never the object that made them: the loop hands a request to the pool's submit(); a worker gives a
  connection back with the loop's hand_back(), in one call, whatever the machine said last (read on, linger,
  close).
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
from .._options import frozen_options, replace
from .._wire import DEFAULT_GRACE_SECONDS
from ..errors import ConfigError
from ._accepting import Door, tls_context
from ._connection import tls_eof, would_block
from ._loop import Loop
from ._machine import Rules
from ._workers import DEFAULT_IDLE_SECONDS, Worker

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
    "ServeOptions",
    "serve_app",
]

DEFAULT_MAX_CONNECTIONS = 1024  # open connections; idle and slow ones cost a buffer, not a thread
DEFAULT_MAX_REQUESTS = 64  # requests running at once: the worker threads
DEFAULT_MAX_QUEUED = 256  # whole requests waiting for a worker; past them, 503
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # for an app without screen(): the most the server reads for it
DEFAULT_READ_TIMEOUT = 30.0  # seconds a client may idle on keep-alive, or take to send a body
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds from a request's first byte to the end of its head
RESERVED_FDS = 64  # descriptors RLIMIT_NOFILE keeps for all but connections: files, pipes, command tools

_WAKEUP_FD = -1  # the key, among the replaced signal handlers, of the wakeup fd that was set before


@frozen_options(frozen=True, kw_only=True)
class ServeOptions:
    """How the server listens and what it bounds: each option named once, here (the command line's HTTP options
    and mcpserver.http.HttpOptions, which adds the app's, are made from these names)."""

    host: str = "127.0.0.1"
    port: int = 3000  # 0 picks a free one
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_queued: int = DEFAULT_MAX_QUEUED
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    read_timeout: float = DEFAULT_READ_TIMEOUT
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    grace_seconds: float = DEFAULT_GRACE_SECONDS  # after SIGTERM/SIGINT, for requests in flight to finish
    tls_cert: Optional[str] = None  # serve HTTPS with this PEM certificate chain (SIGHUP loads it again)
    tls_key: Optional[str] = None  # its private key, unless it is in tls_cert's file
    worker_idle_seconds: float = DEFAULT_IDLE_SECONDS  # a worker idle this long exits (the _workers module)
    unix_socket: Optional[str] = None  # listen on this Unix socket instead of host and port (the _unix module)
    unix_socket_mode: int = 0o600  # the socket file's mode: who may connect (0600: this user alone)

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_requests", "max_body_bytes", "read_timeout", "header_timeout",
                     "worker_idle_seconds"):
            value = getattr(self, name)
            if not value > 0:
                raise ConfigError(f"{name} must be positive, not {value!r}")
        if self.max_queued < 0:
            raise ConfigError(f"max_queued must not be negative, not {self.max_queued!r}")
        if self.tls_key and not self.tls_cert:
            raise ConfigError("a TLS key without a certificate: give --tls-cert too")
        if self.unix_socket is not None:
            self.unix_socket_file()  # checked now: a path AF_UNIX cannot take is refused with the other options

    def unix_socket_file(self) -> Any:
        """The Unix socket's file (httpd._unix.UnixSocketFile) when listening on one, else None."""
        if self.unix_socket is None:
            return None
        from ._unix import UnixSocketFile  # only a server on a Unix socket loads it

        return UnixSocketFile(self.unix_socket, self.unix_socket_mode)


class _Server:
    """One server: its door, its loop and its workers, each given what it uses of the others."""

    def __init__(self, app: Callable[..., Any], options: ServeOptions, tls: Any = None):
        blocking, eof = would_block(tls is not None), tls_eof() if tls is not None else ()
        self.door = Door(options.host, options.port, max_connections=options.max_connections, tls=tls,
                         unix=options.unix_socket_file())
        rules = Rules(read_timeout=options.read_timeout, header_timeout=options.header_timeout,
                      max_body_bytes=options.max_body_bytes, screening=getattr(app, "screen", None) is not None)
        self.loop = loop = Loop(self.door, rules, would_block=blocking, tls_eof=eof)
        self.worker = Worker(app, host=self.door.host, port=self.door.port, read_timeout=options.read_timeout,
                             poller=loop.poller, would_block=blocking, tls_eof=eof, hand_back=loop.hand_back,
                             pump_soon=loop.pump_soon, crowded=loop.crowded,
                             max_requests=options.max_requests, max_queued=options.max_queued,
                             idle_seconds=options.worker_idle_seconds)

    def run(self, grace_seconds: float, hurry: Latch) -> int:
        return self.loop.run(self.worker.pool.submit, self.worker.shutdown_app, grace_seconds, hurry)


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


def serve_app(app: Callable[..., Any], options: Optional[ServeOptions] = None, *, banner: Callable[[str, int], None],
              **keywords: Any) -> int:
    """Serve a WSGI app until SIGTERM/SIGINT; `banner(host, port)` is called once listening. Returns 0.
    `options` (or the same names as keywords: ServeOptions(**keywords)) say where and within which bounds; with
    a `tls_cert` it serves HTTPS."""
    if options is None:
        options = ServeOptions(**keywords)
    elif keywords:
        options = replace(options, **keywords)
    tls = tls_context(options.tls_cert, options.tls_key) if options.tls_cert else None
    fitted = fit_connections(options.max_connections)
    if fitted < options.max_connections:
        print(f"mcpserver: serving at most {fitted} connections, not {options.max_connections}: the limit on open "
              "files (ulimit -n) allows no more", file=sys.stderr, flush=True)
    threading.stack_size(THREAD_STACK_BYTES)
    try:
        server = _Server(app, replace(options, max_connections=fitted), tls)
    except OSError as exc:
        where = f"unix:{options.unix_socket}" if options.unix_socket else f"{options.host}:{options.port}"
        raise ConfigError(f"cannot listen on {where}: {exc.strerror}") from None
    hurry = Latch()
    previous = _handle_signals(server.loop, tls is not None, hurry, options.tls_cert, options.tls_key)
    starting = getattr(previous.get(signal.SIGTERM), "served", None)
    if starting is not None:  # the command line's start-up handler (mcpserver.__main__): serving begins here
        starting()
    banner(server.door.host, server.door.port)  # after the handlers: a signal once it is seen is handled
    try:
        left = server.run(options.grace_seconds, hurry)
        if left:
            print(f"mcpserver: exiting with {left} request(s) still running after the grace period", file=sys.stderr)
    finally:
        server.door.stop()  # again, when the loop did not get to it: a Unix socket's file goes with the server
        for number, previous_handler in previous.items():
            if number == _WAKEUP_FD:
                signal.set_wakeup_fd(previous_handler)
            else:
                signal.signal(number, previous_handler)
    return 0
