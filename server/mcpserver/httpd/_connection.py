"""One client connection of the HTTP server: its socket, what it has sent, where it stands.

Rules of this module:
- A connection is in one state at a time, and its state says who owns it: the loop in HANDSHAKE, IDLE,
  HEAD, BODY, DRAIN, LINGER (WAITING: no request in progress, so reclaimable), WRITING and STREAM; a worker
  in SCREEN, QUEUED and WORKING; nobody once CLOSED.
- Its `lock` orders the moves between the loop and a worker (the state and the arming change together
  under it) and what both may write.
- Its socket is non-blocking with TCP_NODELAY. receive() and send_some() never wait; the caller decides
  what a socket that would block means.
"""

from __future__ import annotations

import socket
import sys
import threading
import time

from ._poller import IN, OUT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ._head import Head

__all__ = ["BODY", "CLOSED", "DRAIN", "HANDSHAKE", "HEAD", "IDLE", "INFINITY", "LINGER", "QUEUED", "RECV_BYTES",
           "SCREEN", "SEND_BYTES", "STREAM", "WAITING", "WORKING", "WRITING", "Connection", "close_result",
           "pending", "print_exception", "tls_eof", "would_block"]

SEND_BYTES = 1 << 20  # the most one send() is given, so one slow reader's megabytes do not hold the loop
RECV_BYTES = 65536
INFINITY = float("inf")

# A connection's states. The loop owns it in all but SCREEN, QUEUED and WORKING.
HANDSHAKE, IDLE, HEAD, BODY, DRAIN, LINGER = "handshake", "idle", "head", "body", "drain", "linger"
SCREEN, QUEUED, WORKING, WRITING, STREAM, CLOSED = "screen", "queued", "working", "writing", "stream", "closed"
WAITING = frozenset((HANDSHAKE, IDLE, HEAD, BODY, DRAIN, LINGER))  # no request in progress: reclaimable


class Connection:
    """One client connection: its socket, what it has sent, where it stands. Its `lock` orders the
    moves between the loop and a worker (state and arming together) and what both may write."""

    __slots__ = ("address", "after", "broken", "buffer", "callbacks", "chunked", "deadline", "environ", "fd", "gone",
                 "head", "head_sent", "interval", "keep_alive", "lock", "out", "peer_done", "poll_at", "probed",
                 "ready", "response", "retry", "searched", "sent", "skip", "sock", "started", "state", "stream",
                 "tls", "waiting_since", "want")

    def __init__(self, sock: socket.socket, address: Any, tls: Any):
        self.sock = sock
        self.fd = sock.fileno()
        self.address = address
        self.tls = tls  # the ssl.SSLContext to wrap with, taken now: a SIGHUP reload is for connections after it
        self.lock = threading.Lock()
        self.buffer = bytearray()
        self.state = HANDSHAKE if tls is not None else IDLE
        self.deadline = INFINITY
        self.waiting_since = time.monotonic()
        self.head: Optional[Head] = None
        self.environ: Optional[dict[str, Any]] = None
        self.callbacks: list[Callable[[], None]] = []  # the running request's on_disconnect callbacks
        self.gone = False  # the client hung up
        self.peer_done = False  # the client sent its FIN: it may still read, but sends no more requests
        self.probed = False  # a half-close was probed; only a hang-up is watched for now
        self.started = False  # the running request's response began to go out
        self.keep_alive = False
        self.response: dict[str, Any] = {}  # what start_response was given
        self.stream: Any = None  # a push stream's result iterable
        self.head_sent = False
        self.chunked = False
        self.out = bytearray()  # what the loop still has to write, from `sent` on
        self.sent = 0
        self.want = OUT  # what a write that would block waits for: OUT, or IN (TLS wants to read first)
        self.broken = False  # a push stream whose on_ready failed
        self.interval = INFINITY  # a push stream's poll_interval
        self.retry = 0  # TLS: the length of a write to repeat as it was (OpenSSL wants the same buffer)
        self.after = IDLE  # where a connection goes once `out` is written: IDLE, CLOSED or LINGER
        self.skip = 0  # DRAIN: body bytes still to skip
        self.searched = 0  # how much of the buffer was searched for a head's end already
        self.poll_at = INFINITY
        self.ready = False  # a push stream asked to be pumped
        sock.setblocking(False)
        # Without TCP_NODELAY keep-alive requests stall ~40 ms each: Nagle meets delayed ACK (23 vs 3,000 req/s).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def receive(self, would_block: tuple[type[BaseException], ...],
                tls_eof: tuple[type[BaseException], ...]) -> tuple[bytes, bool]:
        """What has arrived, without waiting (b"" if nothing), and whether the client sent its FIN.
        OSError when the connection broke."""
        chunks: list[bytes] = []
        total = 0
        # A body still on its way is asked for whole (at most 1 MiB a call): fewer calls for large ones.
        missing = self.head.length - len(self.buffer) if self.head is not None else 0
        size = min(max(missing, RECV_BYTES), 16 * RECV_BYTES)
        while total < 16 * RECV_BYTES:  # then the loop serves others; level-triggered, it comes back
            try:
                chunk = self.sock.recv(size)
            except would_block:
                break
            except tls_eof:
                return b"".join(chunks), True
            if not chunk:
                return b"".join(chunks), True
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < size and not (self.tls is not None and pending(self.sock)):
                break
        return b"".join(chunks), False

    def send_some(self, data: Any, would_block: tuple[type[BaseException], ...]) -> int:
        """Send what the socket takes now of `data` (a TLS write that must be repeated is, with the same
        length); OSError when the connection broke."""
        size = self.retry or min(len(data), SEND_BYTES)
        try:
            sent = self.sock.send(data[:size])
        except would_block as blocked:
            self.retry = size if self.tls is not None else 0
            self.want = IN if type(blocked).__name__ == "SSLWantReadError" else OUT
            return 0
        self.retry = 0
        return sent

    def request_done(self) -> None:
        """The response is out: forget its request (its callbacks, head and environ)."""
        with self.lock:
            self.callbacks = []
            self.head = self.environ = None
            self.started = False


def close_result(result: Any) -> None:
    """WSGI: a result iterable's close(), if it has one, once it is done with (or its connection is)."""
    close = getattr(result, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            print_exception()


def print_exception() -> None:
    """An app's exception, or the server's own bug: the traceback to stderr, where the app logs."""
    import traceback  # only when something went wrong: not at start-up

    traceback.print_exc()


def pending(sock: Any) -> int:
    """TLS: the bytes already decrypted and waiting in the socket, which no poll reports."""
    return int(sock.pending())


def tls_eof() -> tuple[type[BaseException], ...]:
    """The errors a TLS read ends with when the peer closed (none without the ssl module loaded)."""
    ssl = sys.modules.get("ssl")
    return (ssl.SSLZeroReturnError, ssl.SSLEOFError) if ssl is not None else ()


def would_block(tls: bool) -> tuple[type[BaseException], ...]:
    """The errors a non-blocking socket raises for "not now"."""
    if not tls:
        return (BlockingIOError, InterruptedError)
    import ssl

    return (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
