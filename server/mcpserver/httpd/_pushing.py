"""The HTTP server's push streams: a response the loop drives, piece by piece, without a thread.

Rules of this module:
- A result iterable with `on_ready(wake)` is a push stream (environ["mcpserver.push"] says the server drives
  them). The server calls on_ready(wake) once, on the worker (the app may do its stream's work there); after
  wake() (any thread) or `poll_interval` seconds it calls next() on the loop, which must not block (b"" for
  nothing yet; StopIteration at the end).
- A slow reader is not given more until it has taken what was sent.
- A half-close (FIN) is probed, once: before the head an interim `100 Continue` (HTTP/1.1), after it the
  iterable's `probe` as a chunk, if it has one; a peer that is really gone answers with an RST, a hang-up.
  A hang-up ends the stream (its iterable is closed with the connection).
"""

from __future__ import annotations

import time

from ._connection import CLOSED, IDLE, INFINITY, STREAM, close_result, print_exception
from ._poller import HUNG_UP, RDHUP
from ._writing import CONTINUE, chunk, response_head

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._connection import Connection
    from ._loop import Loop
    from ._writing import Writer

__all__ = ["Pusher"]


class Pusher:
    """Push streams: handed to the loop by the worker that ran the request, then pumped by the loop."""

    def join(self, loop: Loop, writer: Writer) -> None:
        """The loop that pumps the streams, and the writer that sends their pieces."""
        self.poller = loop.poller
        self.loop, self.writer = loop, writer

    def push(self, conn: Connection, result: Any, keep: bool) -> None:
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
            result.on_ready(lambda: self.loop.pump_soon(conn))
        except Exception:
            print_exception()
            conn.broken = True
            self.loop.pump_soon(conn)

    # -- on the loop ------------------------------------------------------------------------------------

    def pump(self, conn: Connection) -> None:
        """Ask a push stream for its next piece, unless its client has not taken the last one yet."""
        if conn.broken:
            self.loop.close(conn)
            return
        conn.poll_at = time.monotonic() + conn.interval
        while not conn.out and conn.state == STREAM:  # until it has nothing more, or its client is full
            try:
                piece = next(conn.stream)
            except StopIteration:
                self._stream_over(conn)
                return
            except Exception:
                self.loop.drop(conn)
                return
            if not piece:
                return
            self._stream_send(conn, self._stream_head(conn) + (chunk(piece) if conn.chunked else piece))

    def _stream_head(self, conn: Connection) -> bytes:
        if conn.head_sent:
            return b""
        conn.head_sent = True
        assert conn.head is not None
        data, conn.chunked, conn.keep_alive = response_head(conn.head, conn.response, conn.keep_alive)
        with conn.lock:
            conn.started = True
        return data

    def _stream_send(self, conn: Connection, data: bytes) -> None:
        self.writer.queue(conn, data)
        try:
            done = self.writer.flush(conn)
        except OSError:
            self.loop.hung_up(conn)
            return
        self.poller.arm(conn.fd, (0 if done else conn.want) | (0 if conn.probed else RDHUP))

    def stream_event(self, conn: Connection, events: int) -> None:
        if events & HUNG_UP:
            self.loop.hung_up(conn)
            return
        probe = b""
        if events & RDHUP and not conn.probed:  # a half-close: find out whether the client still reads
            conn.probed = conn.peer_done = True
            if not conn.head_sent:
                probe = CONTINUE if conn.head is not None and conn.head.version == "1.1" else b""
            elif conn.chunked:
                probe = chunk(getattr(conn.stream, "probe", b""))
        self._stream_send(conn, probe)
        if not conn.out and conn.state == STREAM:
            self.pump(conn)  # it was held back while the client had not taken the last piece

    def _stream_over(self, conn: Connection) -> None:
        data = self._stream_head(conn) + (b"0\r\n\r\n" if conn.chunked else b"")
        stream, conn.stream = conn.stream, None
        close_result(stream)
        self.writer.queue(conn, data)
        self.writer.write_out(conn, IDLE if conn.keep_alive and not conn.peer_done else CLOSED)
