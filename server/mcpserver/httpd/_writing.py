"""The HTTP server's writing: a response on its way out, from the worker that made it and then from the loop.

Rules of this module:
- Responses with a Content-Length go out as they are; without one they are chunked (HTTP/1.1), each piece
  as soon as the app yields it (HTTP/1.0 without a length: the end of the body is the end of the connection).
- A worker writes what the socket takes at once, waiting up to DELIVER_WAIT for a client that reads at once,
  and leaves the rest of a whole response to the loop (WRITING), so a slow reader holds no worker; the loop
  writes it as the client reads. An iterable that makes its pieces as it goes is written by its worker,
  blocking, piece by piece. Either way read_timeout without progress ends the connection.
- One send() is given at most SEND_BYTES, so one slow reader's megabytes do not hold the loop.
- A refusal (what screen() returned, or 413) never waits for the body: one of at most MAX_DRAIN_BYTES is
  skipped by the loop (DRAIN) to keep the connection; past it the connection closes after the answer.
- An answer the server writes itself (refusal()) ends the connection with a lingering close (LINGER): a FIN
  after it, then what the client still sends is read and dropped, so an RST cannot destroy the answer
  before the client reads it.
"""

from __future__ import annotations

import select
import socket
import time

from .._malloc import LARGE_BYTES, return_large_buffers
from .._version import __version__
from .._wire import status_line
from ._connection import CLOSED, DRAIN, IDLE, LINGER, WRITING
from ._poller import HUNG_UP, IN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from ._connection import Connection
    from ._head import Head
    from ._loop import Loop
    from ._reading import Reader
    from ._working import Worker

__all__ = ["CONTINUE", "MAX_DRAIN_BYTES", "RETRY_AFTER_SECONDS", "SERVER_HEADER", "Writer", "chunk", "refusal",
           "response_head", "send_quietly"]

MAX_DRAIN_BYTES = 64 * 1024  # a refused request's unread body up to this is skipped to keep the connection
RETRY_AFTER_SECONDS = 1
SERVER_HEADER = f"mcpserver/{__version__}"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Writer:
    """A response going out: a worker's delivery of what the socket takes now, the loop's writing of the
    rest, and where the connection goes once all of it is out."""

    def __init__(self, *, max_body_bytes: int, read_timeout: float, would_block: tuple[type[BaseException], ...]):
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout
        self.would_block = would_block

    def join(self, loop: Loop, reader: Reader, worker: Worker) -> None:
        """The roles a connection goes on to once its response is out."""
        self.poller, self.stopping = loop.poller, loop.stopping
        self.loop = loop
        self.reader = reader  # on the loop: the next request, perhaps in the buffer already
        self.worker = worker  # on a worker: the next request, there if it has come

    # -- on the loop ------------------------------------------------------------------------------------

    def flush(self, conn: Connection) -> bool:
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

    def queue(self, conn: Connection, data: bytes) -> None:
        if conn.sent:
            del conn.out[:conn.sent]
            conn.sent = 0
        conn.out += data

    def writable(self, conn: Connection, events: int) -> None:
        if events & HUNG_UP:
            self.loop.close(conn)
        else:
            self.write_out(conn, conn.after)

    def write_out(self, conn: Connection, after: str) -> None:
        """Write `out`, then go where `after` says; what the socket does not take now, the loop writes
        as the client reads (from the loop, or from a worker that goes free)."""
        try:
            done = self.flush(conn)
        except OSError:
            self.loop.close(conn)
            return
        if done:
            self.then(conn, after)
        elif conn.state == WRITING:
            self.poller.arm(conn.fd, conn.want)
        else:
            conn.after = after
            self.loop.enter(conn, WRITING, conn.want)

    def then(self, conn: Connection, after: str) -> None:
        """Where a connection goes once its response is out (on the loop)."""
        conn.request_done()
        if after == CLOSED or (after == IDLE and (conn.gone or self.stopping.is_set())):
            self.loop.close(conn)
        elif after == LINGER:
            _shut_writing(conn)
            self.loop.enter(conn, LINGER)
        elif after == DRAIN:
            self.loop.enter(conn, DRAIN)
        else:
            conn.waiting_since = time.monotonic()
            self.loop.enter(conn, IDLE, None)
            self.reader.advance(conn)  # a pipelined request may be in the buffer already: it arms what it needs

    def answer_and_close(self, conn: Connection, data: bytes) -> None:
        """A response the server writes itself, then a lingering close (loop or worker)."""
        conn.request_done()
        conn.out, conn.sent = bytearray(data), 0
        self.write_out(conn, LINGER)

    # -- on a worker (or the loop's own answers) --------------------------------------------------------

    def too_large(self) -> tuple[str, list[tuple[str, str]], bytes]:
        body = f"The body is larger than {self.max_body_bytes} bytes\n".encode()
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        return status_line(413), headers, body

    def refused(self, conn: Connection, head: Head, refusal: Any) -> Optional[str]:
        """Answer what screen() said; the body is not waited for: skipped if small, else the connection closes."""
        status, headers, body = refusal
        unread = head.length - len(conn.buffer)
        keep = (head.keep_alive and not conn.peer_done and not self.stopping.is_set()
                and unread <= MAX_DRAIN_BYTES)
        data, _, keep = response_head(head, {"status": status, "headers": headers}, keep)
        if unread > 0:
            conn.buffer.clear()
            conn.skip = unread
        else:
            del conn.buffer[:head.length]
        after = (DRAIN if unread > 0 else IDLE) if keep else (LINGER if unread > 0 else CLOSED)
        return self.deliver(conn, [data, body if head.method != "HEAD" else b""], after)

    def deliver(self, conn: Connection, parts: list[bytes], after: str) -> Optional[str]:
        """Send a whole response: what the socket takes now, the rest by the loop (the worker goes free)."""
        with conn.lock:
            conn.started = True
        size = sum(map(len, parts))
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
                        self.loop.enter(conn, WRITING, conn.want)
                        return None
                    sent += taken
        except OSError:
            self.loop.close(conn)
            return None
        return self.worker.after(conn, after)

    def _writable_soon(self, conn: Connection) -> bool:
        """Whether the socket takes more within DELIVER_WAIT: a client that reads at once costs no hand-off
        (never on the loop, which must not wait)."""
        return self.poller.ready_soon(conn.fd, select.POLLIN if conn.want == IN else select.POLLOUT)

    def send_blocking(self, conn: Connection, data: bytes) -> None:
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


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""


def refusal(status: int, message: str, *extra: str) -> bytes:
    """A response the server writes itself (and then closes the connection)."""
    body = (message + "\n").encode()
    lines = [f"HTTP/1.1 {status_line(status)}", f"Server: {SERVER_HEADER}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(body)}", *extra, "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def response_head(head: Head, response: dict[str, Any], keep_alive: bool) -> tuple[bytes, bool, bool]:
    """(the status line and header fields, whether the body is chunked, whether the connection is kept)."""
    lines = [f"HTTP/1.1 {response['status']}", f"Server: {SERVER_HEADER}"]
    sized = False
    for name, value in response["headers"]:  # one loop, no generator frames: this runs for every answer
        lines.append(f"{name}: {value}")
        if not sized and name.lower() == "content-length":
            sized = True
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


def send_quietly(conn: Connection, data: bytes) -> None:
    """A few bytes into an empty send buffer (an interim 100 Continue): it takes them, or the client is gone."""
    try:
        conn.sock.send(data)
    except OSError:
        pass


def _shut_writing(conn: Connection) -> None:
    """The answer is out: a FIN after it, while what the client still sends is read and dropped (closing
    with unread data would send an RST, which can destroy the answer before the client reads it)."""
    try:
        socket.socket.shutdown(conn.sock, socket.SHUT_WR)
    except OSError:
        pass
