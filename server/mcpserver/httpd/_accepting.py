"""The HTTP server's door: the listening socket, and who of those who connect gets a place (the loop says whether
there is room).

Rules of this module:
- At most max_connections open connections (serve_app keeps that below RLIMIT_NOFILE). At the limit, a
  newcomer takes the place of the connection that has waited longest without a request in progress (idle,
  sending a head or a body, skipping a refused body), else of the longest-stalled slow reader; only when
  every connection runs a request or a stream does it wait, FULL_HOUSE_GRACE at most (64 such at most), for
  one to start waiting, and past that it is answered 503 with Retry-After (closed unanswered on TLS, which
  it could not read).
- Accepting takes at most 64 newcomers at a time, so the loop serves the others in between. Out of
  descriptors, it says so, and the loop listens again at its next sweep.
- It listens on a TCP address, or on a Unix socket whose file httpd._unix makes and removes.
- TLS (tls_context): TLS 1.2 or newer with the ssl module's defaults, HTTP/1.1 by ALPN. A connection
  takes the TLS context current when it is accepted: a SIGHUP reload is for the connections
  after it, and one that cannot be loaded keeps the old one (stderr says why).
"""

from __future__ import annotations

import errno
import socket
import sys
import time
from collections import deque

from ..errors import ConfigError
from ._machine import RETRY_AFTER_SECONDS, refusal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ._unix import UnixSocketFile

__all__ = ["FULL_HOUSE_GRACE", "Door", "tls_context"]

# When every connection is busy, how long a newcomer waits for one to start waiting: a connection that
# has just sent its answer is handed back a moment after its client can read it and connect again.
FULL_HOUSE_GRACE = 0.05
MAX_NEWCOMERS = 64  # newcomers waiting for a place at once; past them, 503


class Door:
    """The listening socket, the newcomers waiting for a place, and the TLS context new connections get. Who has
    a place is the loop's to say: accept() and admit_waiting() are given `room()`, which makes room if it can,
    and `open(sock, address)`, which takes a newcomer in."""

    def __init__(self, host: str, port: int, *, max_connections: int, tls: Any, unix: Optional[UnixSocketFile] = None):
        """`unix`: listen on that Unix socket instead of host and port (then `host` is its path, `port` 0)."""
        self.tls = tls  # an ssl.SSLContext, or None for plain HTTP
        self.max_connections = max_connections
        self.newcomers: deque[tuple[socket.socket, Any, float]] = deque()  # (socket, address, deadline)
        self.stopped = False
        self.unix = unix
        if unix is not None:
            self.listener = unix.listen()
            self.host, self.port = unix.path, 0
        else:
            self.listener = _listening_socket(host, port)
            self.host, self.port = str(self.listener.getsockname()[0]), int(self.listener.getsockname()[1])

    def accept(self, room: Callable[[], bool], open: Callable[[socket.socket, Any], None]) -> bool:
        """Take in who has connected, 64 at most; True when out of descriptors (accept again later)."""
        deadline = time.monotonic() + FULL_HOUSE_GRACE
        for _ in range(64):  # then the loop serves others; the listener stays readable
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as exc:
                if exc.errno == errno.ECONNABORTED:  # the client gave up before it was accepted
                    continue
                return True
            if room():
                open(sock, address)
            elif len(self.newcomers) < MAX_NEWCOMERS and not self.stopped:
                self.newcomers.append((sock, address, deadline))  # a connection may start waiting within the grace
            else:
                _refuse_newcomer(sock, self.tls is None)
        return False

    def admit_waiting(self, now: float, room: Callable[[], bool], open: Callable[[socket.socket, Any], None]) -> None:
        """The newcomers waiting for a place, in order: in if there is room, refused once their grace is over."""
        while self.newcomers:
            sock, address, deadline = self.newcomers[0]
            if room():
                self.newcomers.popleft()
                open(sock, address)
            elif now >= deadline or self.stopped:
                self.newcomers.popleft()
                _refuse_newcomer(sock, self.tls is None)
            else:
                return

    def stop(self) -> None:
        """Accept no more, and close the newcomers still waiting for a place."""
        self.stopped = True
        self.listener.close()
        if self.unix is not None:
            self.unix.remove()
        while self.newcomers:
            self.newcomers.popleft()[0].close()

    def reload_certificate(self, cert: str, key: Optional[str]) -> None:
        """Load the certificate again for connections accepted from now on; keep the current one if it fails."""
        try:
            self.tls = tls_context(cert, key)
            print("mcpserver: SIGHUP: TLS certificate reloaded", file=sys.stderr, flush=True)
        except ConfigError as exc:
            print(f"mcpserver: SIGHUP: keeping the current TLS certificate: {exc}", file=sys.stderr, flush=True)


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
            sock.send(refusal(503, "Too many connections", f"Retry-After: {RETRY_AFTER_SECONDS}"))
    except OSError:
        pass
    sock.close()
