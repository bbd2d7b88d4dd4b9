"""One client connection of the HTTP server: its socket, what it still has to write, and its machine.

Rules of this module:
- The connection's machine (the _machine module) says where it stands; `busy` says who has it: a worker while
  True, else the loop. Only the loop makes it busy (it hands the request to a worker); the worker that has it
  gives it back, or has it closed, with the loop's hand_back.
- Its `lock` orders what both the loop and a worker may do at once: a hand-over (busy, the arming, the tables),
  the disconnect watch and its callbacks, and the start of a response (after it, no probe may be sent).
- Its socket is non-blocking, with TCP_NODELAY over TCP. receive(), send_some(), flush() and handshake() never wait; the
  caller decides what a socket that would block means (deliver() asks it: the writable_soon it is given).
"""

from __future__ import annotations

import socket
import sys
import threading

from .._malloc import LARGE_BYTES, return_large_buffers
from ._machine import INFINITY, MAX_HEAD_BYTES
from ._poller import IN, OUT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ._machine import Machine

__all__ = ["HANDSHAKE_DONE", "HANDSHAKE_FAILED", "NOT_TLS", "RECV_BYTES", "SEND_BYTES", "Connection", "close_result",
           "pending", "print_exception", "send_quietly", "shut_writing", "tls_eof", "would_block"]

SEND_BYTES = 1 << 20  # the most one send() is given, so one slow reader's megabytes do not hold the loop
RECV_BYTES = 65536
# What handshake() says besides the event it waits for (IN or OUT).
HANDSHAKE_DONE, HANDSHAKE_FAILED, NOT_TLS = -1, -2, -3


class Connection:
    """One client connection: its socket, its machine, who has it (`busy`), what it still has to write, and what
    its drivers keep for the request in progress (environ, response, on_disconnect callbacks, a push stream)."""

    __slots__ = ("address", "broken", "busy", "callbacks", "environ", "fd", "interval", "lock", "machine", "out",
                 "poll_at", "ready", "response", "retry", "sent", "sock", "stream", "tls", "want")

    def __init__(self, sock: socket.socket, address: Any, tls: Any, machine: Machine):
        self.sock = sock
        self.fd = sock.fileno()
        self.address = address
        self.tls = tls  # the ssl.SSLContext to wrap with, taken now: a SIGHUP reload is for connections after it
        self.machine = machine
        self.lock = threading.Lock()
        self.busy = False  # a worker has it
        self.environ: Optional[dict[str, Any]] = None
        self.response: dict[str, Any] = {}  # what start_response was given
        self.callbacks: list[Callable[[], None]] = []  # the running request's on_disconnect callbacks
        self.out = bytearray()  # what is still to be written, from `sent` on
        self.sent = 0
        self.want = OUT  # what a write that would block waits for: OUT, or IN (TLS wants to read first)
        self.retry = 0  # TLS: the length of a write to repeat as it was (OpenSSL wants the same buffer)
        self.stream: Any = None  # a push stream's result iterable
        self.broken = False  # a push stream whose on_ready failed
        self.interval = INFINITY  # a push stream's poll_interval
        self.poll_at = INFINITY
        self.ready = False  # a push stream asked to be pumped
        sock.setblocking(False)
        if address.__class__ is tuple:  # TCP (a Unix socket's peer is a path, or "", and has no Nagle to turn off)
            # Without TCP_NODELAY keep-alive requests stall ~40 ms each: Nagle meets delayed ACK (23 vs 3,000 req/s).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def receive(self, would_block: tuple[type[BaseException], ...],
                tls_eof: tuple[type[BaseException], ...]) -> tuple[bytes, bool]:
        """What has arrived, without waiting (b"" if nothing), and whether the client sent its FIN.
        OSError when the connection broke."""
        chunks: list[bytes] = []
        total = 0
        # A body still on its way is asked for whole (at most 1 MiB a call): fewer calls for large ones.
        machine = self.machine
        missing = machine.head.length - len(machine.buffer) if machine.head is not None else 0
        size = min(max(missing, RECV_BYTES), 16 * RECV_BYTES)
        if missing >= LARGE_BYTES:  # malloc's mmap threshold pinned, so a large body's buffers go back when freed
            return_large_buffers()
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

    def deliver(self, parts: list[bytes], would_block: tuple[type[BaseException], ...],
                writable_soon: Callable[[Connection], bool]) -> bool:
        """Send a whole response: what the socket takes, and more while `writable_soon(self)` says the client
        reads on. True once all of it is out (what was kept for its request is then forgotten); False when the
        client stalled, with the rest left in `out` for the loop to write. OSError when the connection broke."""
        size = sum(map(len, parts))
        if size < LARGE_BYTES:  # one send, one segment, for the common case
            parts = [b"".join(parts)]
        else:  # not joined (megabytes copied); malloc's mmap threshold pinned, so such buffers go back when freed
            return_large_buffers()
        for index, part in enumerate(parts):
            sent = 0
            while sent < len(part):
                taken = self.send_some(memoryview(part)[sent:], would_block)
                if not taken and not writable_soon(self):
                    self.out = bytearray(memoryview(part)[sent:]) + b"".join(parts[index + 1:])
                    self.sent = 0
                    return False
                sent += taken
        self.request_done()
        return True

    def queue(self, data: bytes) -> None:
        """Add to what is still to be written."""
        if self.sent:
            del self.out[:self.sent]
            self.sent = 0
        self.out += data

    def flush(self, would_block: tuple[type[BaseException], ...]) -> tuple[bool, bool]:
        """Write what the socket takes of `out`: (whether all of it is written, whether any was). OSError if the
        client is gone."""
        out, before = self.out, self.sent
        view = memoryview(out)
        try:
            while self.sent < len(out):
                sent = self.send_some(view[self.sent:], would_block)
                if not sent:
                    break
                self.sent += sent
        finally:
            view.release()
        if self.sent < len(out):
            return False, self.sent > before
        self.out, self.sent = bytearray(), 0
        return True, True

    def handshake(self, would_block: tuple[type[BaseException], ...]) -> int:
        """One step of the TLS handshake: HANDSHAKE_DONE, IN or OUT (what it waits for), HANDSHAKE_FAILED, or
        NOT_TLS: a plain-HTTP request came to the TLS port (read and dropped, so an answer is not reset away)."""
        import ssl

        if not isinstance(self.sock, ssl.SSLSocket):
            try:
                first = self.sock.recv(1, socket.MSG_PEEK)
            except would_block:
                return IN
            except OSError:
                first = b""
            if not first:
                return HANDSHAKE_FAILED
            if first.isalpha():  # a TLS handshake starts with byte 0x16; this is a plain-HTTP request
                try:
                    self.sock.recv(MAX_HEAD_BYTES)
                except OSError:
                    pass
                return NOT_TLS
            self.sock = self.tls.wrap_socket(self.sock, server_side=True, do_handshake_on_connect=False)
        tls_sock: Any = self.sock
        try:
            tls_sock.do_handshake()
        except ssl.SSLWantReadError:
            return IN
        except ssl.SSLWantWriteError:
            return OUT
        except OSError:  # ssl.SSLError included: a failed handshake
            return HANDSHAKE_FAILED
        return HANDSHAKE_DONE

    def request_done(self) -> None:
        """The response is out: forget what was kept for its request."""
        with self.lock:
            self.callbacks = []
            self.environ = None


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


def send_quietly(conn: Connection, data: bytes) -> None:
    """A few bytes into an empty send buffer (an interim 100 Continue): it takes them, or the client is gone."""
    try:
        conn.sock.send(data)
    except OSError:
        pass


def shut_writing(conn: Connection) -> None:
    """The answer is out: a FIN after it, while what the client still sends is read and dropped (closing
    with unread data would send an RST, which can destroy the answer before the client reads it)."""
    try:
        socket.socket.shutdown(conn.sock, socket.SHUT_WR)
    except OSError:
        pass


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
