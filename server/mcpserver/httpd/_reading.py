"""The HTTP server's reading: a request coming in, on the loop and on the worker that has its connection.

Rules of this module:
- Requests are parsed strictly (RFC 9112) by _head, which settles the framing once; the head is at most
  MAX_HEAD_BYTES (431), searched for its end from where the last search stopped, so a head trickling in is
  not searched again whole. After any framing error the server answers and closes the connection (a
  lingering close), so bytes meant as a body can never be read as another request.
- On the loop: the TLS handshake (a plain-HTTP request on a TLS port gets a plain 400 that says so), idle
  keep-alive, a head or a body on its way, a refused body being skipped (DRAIN) and what a client still
  sends after a lingering close (LINGER, dropped). None of them costs a thread.
- A request goes to a worker once its head is in when the app screens (SCREEN), else once its whole body is
  in (QUEUED), at most max_body_bytes (413). The client gets `100 Continue` when it asked for one and its
  body is wanted. A client that sends its FIN before a whole request is closed.
- On a worker, reading waits only a moment: up to DELIVER_WAIT for more of an accepted body that streams in,
  up to KEEP_ALIVE_LINGER for a keep-alive client's next request; a client slower than that is the loop's.
"""

from __future__ import annotations

import select
import socket
import time

from ._connection import BODY, DRAIN, HANDSHAKE, HEAD, IDLE, LINGER, QUEUED, SCREEN, pending
from ._head import MAX_HEAD_BYTES, HttpError, parse_head
from ._poller import IN, OUT
from ._writing import CONTINUE, RETRY_AFTER_SECONDS, refusal, send_quietly

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from ._connection import Connection
    from ._loop import Loop
    from ._working import Workers
    from ._writing import Writer

__all__ = ["KEEP_ALIVE_LINGER", "TOO_LARGE", "Reader"]

# After a response, a worker waits this long for the same client's next request before it hands the
# connection to the loop: a keep-alive client's next request then costs no hand-off between threads.
KEEP_ALIVE_LINGER = 0.002
TOO_LARGE = "too large"  # not a state: what next_step says of a head whose body exceeds max_body_bytes



def head_end(buffer: bytearray, start: int, stop: int) -> Optional[tuple[int, int]]:
    """Where the blank line that ends a head starts and ends: the first \\r?\\n\\r?\\n in buffer[start:stop],
    or None. Two finds, where a regex search cost 42k instructions on a 400-byte request: it tries a match
    at every byte."""
    crlf = buffer.find(b"\n\r\n", start, stop)  # the common CRLF head; a bare LF one may end before it
    lf = buffer.find(b"\n\n", start, stop if crlf < 0 else crlf + 1)
    if lf >= 0:
        at, end = lf, lf + 2
    elif crlf >= 0:
        at, end = crlf, crlf + 3
    else:
        return None
    if at > start and buffer[at - 1] == 13:  # the CR of the last header line's CRLF
        at -= 1
    return at, end


class Reader:
    """A request coming in: its handshake, head and body on the loop (and a refused body skipped, or what
    comes after a lingering close); on a worker, a body still streaming in and a keep-alive client's next
    request."""

    def __init__(self, *, screening: bool, max_body_bytes: int, read_timeout: float,
                 would_block: tuple[type[BaseException], ...], tls_eof: tuple[type[BaseException], ...]):
        self.screening = screening  # the app has screen(): a head goes to a worker before its body is read
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout
        self.would_block = would_block
        self.tls_eof = tls_eof

    def join(self, loop: Loop, writer: Writer, workers: Workers) -> None:
        """The roles a request goes on to: the loop's moves, the writer's answers, the workers."""
        self.poller = loop.poller
        self.loop, self.writer, self.workers = loop, writer, workers

    # -- on the loop ------------------------------------------------------------------------------------

    def readable(self, conn: Connection) -> None:
        if conn.state == HANDSHAKE:
            self._handshake(conn)
            return
        try:
            data, eof = conn.receive(self.would_block, self.tls_eof)
        except OSError:
            self.loop.close(conn)
            return
        if conn.state == LINGER:  # an answer is out; what the client still sends is dropped
            if eof:
                self.loop.close(conn)
            else:
                self.poller.arm(conn.fd, IN)
            return
        if conn.state == DRAIN:
            taken = min(conn.skip, len(data))
            conn.skip -= taken
            data = data[taken:]
            if conn.skip:
                self.loop.close(conn) if eof else self.poller.arm(conn.fd, IN)
                return
            conn.state, conn.deadline = IDLE, time.monotonic() + self.read_timeout
        conn.buffer += data
        conn.peer_done = conn.peer_done or eof
        self.advance(conn)

    def advance(self, conn: Connection) -> None:
        """What the buffer holds decides: wait for more, refuse, or hand the request to a worker."""
        try:
            step = self.next_step(conn)
        except HttpError as refused:
            self.writer.answer_and_close(conn, refusal(refused.status, refused.message))
            return
        if step == TOO_LARGE:
            assert conn.head is not None
            self.writer.refused(conn, conn.head, self.writer.too_large())
            return
        if step in (SCREEN, QUEUED):
            self.loop.take(conn, step)
            if not self.workers.submit(conn):
                self.writer.answer_and_close(conn, refusal(503, "Too many requests in progress; try again",
                                                     f"Retry-After: {RETRY_AFTER_SECONDS}"))
            return
        if conn.peer_done:  # the client sends no more, and what it sent is not a whole request
            self.loop.close(conn)
        elif step == BODY and conn.state != BODY:
            if conn.head is not None and conn.head.expect_continue:
                send_quietly(conn, CONTINUE)
            self.loop.enter(conn, BODY)
        elif conn.state == IDLE and conn.buffer:
            self.loop.enter(conn, HEAD)  # its first byte: the head's deadline starts now
        else:
            self.poller.arm(conn.fd, IN)

    def next_step(self, conn: Connection) -> Optional[str]:
        """SCREEN or QUEUED when a request can go to a worker, BODY while its body is on the way, None
        while its head is; HttpError for a head the server refuses itself."""
        if conn.head is None:
            buffer = conn.buffer
            if buffer.startswith((b"\r", b"\n")):  # RFC 9112 §2.2: empty lines before a request are skipped
                del buffer[:len(buffer) - len(buffer.lstrip(b"\r\n"))]
                conn.searched = 0
            # From just before where the last search ended: a head trickling in is not searched again whole.
            found = head_end(buffer, max(0, conn.searched - 3), MAX_HEAD_BYTES + 4)
            if found is None:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise HttpError(431, f"Request head larger than {MAX_HEAD_BYTES} bytes")
                conn.searched = len(buffer)
                return None
            head = parse_head(bytes(buffer[:found[0]]))
            del buffer[:found[1]]
            conn.searched = 0
            conn.head, conn.environ = head, None
            if self.screening:
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
                self.loop.close(conn)
                return
            if first.isalpha():  # a TLS handshake starts with byte 0x16; this is a plain-HTTP request
                try:  # taken, so closing with it unread does not reset the answer away
                    conn.sock.recv(MAX_HEAD_BYTES)
                except OSError:
                    pass
                self.writer.answer_and_close(conn, refusal(400, "This port speaks HTTPS: use https://"))
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
            self.loop.close(conn)
            return
        conn.state, conn.deadline = IDLE, time.monotonic() + self.read_timeout
        self.readable(conn)  # a request may have come with the handshake's last flight

    # -- on a worker ------------------------------------------------------------------------------------

    def body_soon(self, conn: Connection, length: int) -> bool:
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

    def _readable_soon(self, conn: Connection) -> bool:
        return self.poller.ready_soon(conn.fd, select.POLLIN)

    def wait_for_next(self, conn: Connection) -> None:
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
