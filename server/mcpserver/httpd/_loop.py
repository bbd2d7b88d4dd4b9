"""The HTTP server's loop: one thread that owns every connection not running a request.

Rules of this module:
- One loop thread owns every connection that is not running a request: the TLS handshake, idle keep-alive,
  a head or a body on its way, a refused body being skipped, a response a slow reader has not taken yet,
  and push streams. Those cost no thread and no worker, so hundreds of idle, slow or listening clients
  leave the workers to requests.
- Every move of a connection between the loop and a worker (enter, take, close) changes its state, its
  place in the tables and its arming together, under the connection's lock and then the loop's `lock`
  (that order, never the other way round). The loop's `lock` guards the tables and the wake-up flag, and is
  held for nothing else.
- The tables: every open connection by descriptor; those waiting with no request in progress
  (reclaimable), longest-waiting first; slow readers (WRITING), longest-stalled first. A connection that
  starts waiting while a newcomer waits for a place wakes the loop, which admits the newcomer.
- Deadlines, kept by the loop (a sweep at least every SWEEP_SECONDS): read_timeout to idle on keep-alive or
  to send a body (and for a slow reader to take more of a response), header_timeout from a request's
  first byte to the end of its head (408 if some of it came) and for a TLS handshake, LINGER_SECONDS for
  what follows an answer that left a body unread. Every TRIM_SECONDS the sweep also gives malloc's free
  pages back (the _malloc module).
- Any thread wakes the loop through a pipe (poke() takes no lock: safe in a signal handler). With poll()
  rather than epoll, only the loop closes a connection: a close asked for elsewhere is handed to it.
- A bug while serving one connection (an exception out of its event) closes that connection, logged;
  everyone else is served on.
- Stopping (`stopping`): stop accepting, close the connections that wait, call the app's `shutdown()` (its
  streams end), and let requests in flight finish within grace_seconds, or until `hurry`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from .._latch import Latch
from .._malloc import TRIM_SECONDS, trim
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
    close_result,
    print_exception,
)
from ._poller import IN, Poller
from ._writing import refusal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from ._accepting import Acceptor
    from ._connection import Connection
    from ._pushing import Pusher
    from ._reading import Reader
    from ._working import Worker
    from ._writing import Writer

__all__ = ["LINGER_SECONDS", "SWEEP_SECONDS", "Loop"]

# After an answer that leaves a body unread: the time the client has to send a small one (which is then
# skipped and the connection kept), or for the answer to reach it before the close.
LINGER_SECONDS = 2.0
SWEEP_SECONDS = 0.25  # how often the loop looks for deadlines passed (and quiet push streams to poll)


class Loop:
    """The loop thread and what it owns: the connections no worker has, their moves, their deadlines, and
    the readiness that drives them (each state's events go to the role that serves it)."""

    def __init__(self, *, read_timeout: float, header_timeout: float):
        self.read_timeout = read_timeout
        self.header_timeout = header_timeout
        self.sweep_seconds = min(SWEEP_SECONDS, read_timeout / 4, header_timeout / 4)
        self.stopping = Latch()  # set by the signal handler: it must take no lock
        self.reload: Optional[tuple[str, Optional[str]]] = None  # (certificate, key) a SIGHUP asked to load
        self.lock = threading.Lock()  # the tables below, and the wake-up flag
        self.connections: dict[int, Connection] = {}  # by fd
        self.waiting: OrderedDict[Connection, None] = OrderedDict()  # reclaimable, longest-waiting first
        self.writers: OrderedDict[Connection, None] = OrderedDict()  # slow readers, longest-stalled first
        self._ready: list[Connection] = []  # push streams that called wake()
        self._closing: list[Connection] = []  # poll(): closes asked for off the loop
        self._woken = False
        self._wake_read, self.wake_fd = os.pipe()  # wake_fd: also signal.set_wakeup_fd's
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self.wake_fd, False)
        self.poller = Poller(self.wake)

    def join(self, acceptor: Acceptor, reader: Reader, writer: Writer, pusher: Pusher, worker: Worker) -> None:
        """The roles that serve each state's events, and the acceptor whose newcomers wait for a place."""
        self.acceptor, self.reader, self.writer, self.pusher, self.worker = acceptor, reader, writer, pusher, worker
        self.poller.watch(self._wake_read, IN)

    # -- waking the loop --------------------------------------------------------------------------------

    def poke(self) -> None:
        """Wake the loop; safe in a signal handler (takes no lock)."""
        try:
            os.write(self.wake_fd, b"!")
        except OSError:
            pass

    def wake(self) -> None:
        with self.lock:
            if self._woken:
                return
            self._woken = True
        self.poke()

    def pump_soon(self, conn: Connection) -> None:
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

    def run(self, grace_seconds: float, hurry: Latch) -> int:
        """Serve until `stopping`, then drain; return how many connections were still busy at the end."""
        self.poller.loop_thread = threading.get_ident()
        sweep_at, trim_at, stop_at = 0.0, time.monotonic() + TRIM_SECONDS, None
        newcomers = self.acceptor.newcomers  # waiting for a place, each with its deadline
        while True:
            now = time.monotonic()
            timeout = max(0.0, min(sweep_at - now, newcomers[0][2] - now if newcomers else INFINITY))
            for fd, events in self.poller.poll(0.0 if self._ready else timeout):
                try:
                    self._event(fd, events)
                except Exception:  # a bug, ours or the interpreter's: that connection goes, everyone else stays
                    self._fault(fd)
            now = time.monotonic()
            if newcomers:
                self.acceptor.admit_waiting(now)
            if now >= sweep_at:
                self._sweep(now)
                sweep_at = now + self.sweep_seconds
                if now >= trim_at:
                    trim()
                    trim_at = now + TRIM_SECONDS
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
            self.drop(conn)
        else:
            print_exception()

    def drop(self, conn: Connection) -> None:
        """The server's own bug while serving `conn`: logged, and that connection closed."""
        print_exception()
        self.close(conn)

    def _event(self, fd: int, events: int) -> None:
        if fd == self._wake_read:
            self._woken_up()
            return
        conn = self.connections.get(fd)
        if conn is None:
            if fd == self.acceptor.listener.fileno() and not self.stopping.is_set():
                self.acceptor.accept()
            return
        state = conn.state
        if state in WAITING:
            self.reader.readable(conn)
        elif state == WORKING:
            self.worker.watched(conn, events)
        elif state == WRITING:
            self.writer.writable(conn, events)
        elif state == STREAM:
            self.pusher.stream_event(conn, events)

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
            self.close(conn)
        if self.reload is not None:
            files, self.reload = self.reload, None
            self.acceptor.reload_certificate(*files)
        for conn in ready:
            if conn.state == STREAM:
                self.pusher.pump(conn)

    def _sweep(self, now: float) -> None:
        """Deadlines: close what waited too long; poll push streams that have been quiet."""
        self.acceptor.resume()
        with self.lock:
            connections = list(self.connections.values())
        for conn in connections:
            state = conn.state
            if state == STREAM:
                if now >= conn.poll_at:
                    self.pusher.pump(conn)
            elif (state in WAITING or state == WRITING) and now >= conn.deadline:
                if state == HEAD and conn.buffer:
                    self.writer.answer_and_close(conn, refusal(408, f"The request head took longer than "
                                                              f"{self.header_timeout:g} s"))
                else:
                    self.close(conn)

    # -- a connection's moves ---------------------------------------------------------------------------

    def _deadline(self, state: str, now: float) -> float:
        if state in (HANDSHAKE, HEAD):
            return now + self.header_timeout
        if state in (LINGER, DRAIN):  # the answer is out: what is left is a courtesy, kept short
            return now + LINGER_SECONDS
        if state in (IDLE, BODY, WRITING):
            return now + self.read_timeout
        return INFINITY

    def add(self, conn: Connection) -> None:
        """A connection just accepted: the loop's from now on."""
        with self.lock:
            self.connections[conn.fd] = conn
        self.enter(conn, conn.state, new=True)

    def enter(self, conn: Connection, state: str, mask: Optional[int] = IN, new: bool = False) -> None:
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
                newcomers = bool(self.acceptor.newcomers)
            conn.state = state
            if new:
                self.poller.add(conn.fd, IN if mask is None else mask)
            elif mask is not None:
                self.poller.arm(conn.fd, mask)
        if newcomers and (state in WAITING or state == WRITING):
            self.wake()  # a newcomer waits for a place, and this one can now be reclaimed

    def take(self, conn: Connection, state: str) -> None:
        """The loop gives `conn` to a worker (SCREEN or QUEUED): it no longer waits."""
        with conn.lock:
            conn.state = state
            with self.lock:
                self.waiting.pop(conn, None)

    def close(self, conn: Connection) -> None:
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
                newcomers = bool(self.acceptor.newcomers)
            self.poller.forget(conn.fd)
        stream, conn.stream = conn.stream, None
        if stream is not None:
            close_result(stream)
        try:
            conn.sock.close()
        except OSError:
            pass
        if newcomers:
            self.wake()

    def hung_up(self, conn: Connection) -> None:
        """The client is gone: tell whoever asked, and close unless a worker still has the connection."""
        with conn.lock:
            conn.gone = True
            callbacks, conn.callbacks = conn.callbacks, []
            state = conn.state
        for callback in callbacks:
            try:
                callback()
            except Exception:
                print_exception()
        if state not in (SCREEN, QUEUED, WORKING):
            self.close(conn)

    def reclaim(self) -> bool:
        """Make room: close the connection that has waited longest, else the longest-stalled slow reader."""
        with self.lock:
            victim = next(iter(self.waiting), None) or next(iter(self.writers), None)
        if victim is None:
            return False
        self.close(victim)
        return True

    # -- stopping ---------------------------------------------------------------------------------------

    def _begin_stop(self, deadline: float) -> float:
        """Stop accepting and let the app end its long streams; the drain then has until `deadline`."""
        self.acceptor.stop()
        self.worker.shutdown_app()
        return deadline

    def _close_waiting(self) -> int:
        """Close every connection that waits; return how many are still busy."""
        with self.lock:
            waiting = list(self.waiting)
        for conn in waiting:
            self.close(conn)
        with self.lock:
            return len(self.connections)
