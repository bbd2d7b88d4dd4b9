"""The HTTP server's loop: one thread that has every connection no worker has, and drives its machine.

Rules of this module:
- The loop turns readiness, deadlines and hang-ups into the events of each connection's machine (the _machine
  module) and carries out the action each returns: it reads and writes the socket, arms it, hands a request to
  a worker (`submit`), lingers, closes. It decides nothing of HTTP itself.
- It has every connection that is not running a request: the TLS handshake, idle keep-alive, a head or a body on
  its way, a refused body being skipped, what a client still sends after a lingering close, the rest of a
  response a slow reader has not taken yet, and push streams. Those cost no thread and no worker, so hundreds
  of idle, slow or listening clients leave the workers to requests.
- A connection moves between the loop and a worker under its own lock and then the loop's `lock` (that order,
  never the other way round): busy, the tables and the arming change together (enter, and WORK). The loop's
  `lock` guards the tables and the wake-up flag, and is held for nothing else.
- The tables: every open connection by descriptor; those waiting with no request in progress (reclaimable),
  longest-waiting first; slow readers (WRITING), longest-stalled first. At the bound on connections a newcomer
  takes the place of the first of them (the _accepting module); a connection that starts waiting while a
  newcomer waits for a place wakes the loop, which admits the newcomer.
- The sweep (at least every SWEEP_SECONDS) asks each machine whether its deadline passed, and pumps push streams
  that have been quiet for their poll_interval. Every TRIM_SECONDS it also gives malloc's free pages back (the
  _malloc module).
- Any thread wakes the loop through a pipe (poke() takes no lock: safe in a signal handler). With poll()
  rather than epoll, only the loop closes a connection: a close asked for elsewhere is handed to it.
- A bug while serving one connection (an exception out of its event) closes that connection, logged;
  everyone else is served on.
- Push streams: after the stream's wake() (any thread) or its poll_interval, the loop calls next(), which must
  not block (b"" for nothing yet). A slow reader is not given more until it has taken what was sent.
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
    HANDSHAKE_DONE,
    HANDSHAKE_FAILED,
    NOT_TLS,
    Connection,
    close_result,
    print_exception,
    send_quietly,
    shut_writing,
)
from ._machine import (
    CLOSE,
    CLOSED,
    HANDSHAKE,
    INFINITY,
    LINGER_CLOSE,
    NOTHING,
    READ,
    RETRY_AFTER_SECONDS,
    STREAM,
    WAITING,
    WORK,
    WRITE,
    WRITING,
    Machine,
)
from ._poller import ARMED, HUNG_UP, IN, RDHUP, Poller

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any, Callable, Optional

    from ._accepting import Door
    from ._machine import Rules

__all__ = ["SWEEP_SECONDS", "Loop"]

SWEEP_SECONDS = 0.25  # how often the loop looks for deadlines passed (and quiet push streams to poll)


class Loop:
    """The loop thread: the connections no worker has, their moves and deadlines, and the readiness that drives
    their machines."""

    def __init__(self, door: Door, rules: Rules, *, would_block: tuple[type[BaseException], ...],
                 tls_eof: tuple[type[BaseException], ...]):
        self.door = door
        self.rules = rules
        self.would_block, self.tls_eof = would_block, tls_eof
        self.sweep_seconds = min(SWEEP_SECONDS, rules.read_timeout / 4, rules.header_timeout / 4)
        self.stopping = Latch()  # set by the signal handler: it must take no lock
        self.reload: Optional[tuple[str, Optional[str]]] = None  # (certificate, key) a SIGHUP asked to load
        self.submit: Callable[[Connection], bool] = lambda conn: False  # the workers' pool, given to run()
        self.lock = threading.Lock()  # the tables below, and the wake-up flag
        self.connections: dict[int, Connection] = {}  # by fd
        self.waiting: OrderedDict[Connection, None] = OrderedDict()  # reclaimable, longest-waiting first
        self.writers: OrderedDict[Connection, None] = OrderedDict()  # slow readers, longest-stalled first
        self._ready: list[Connection] = []  # push streams that called wake()
        self._closing: list[Connection] = []  # poll(): closes asked for off the loop
        self._woken = False
        self._paused = False  # out of descriptors: the listener is not watched until the next sweep
        self._wake_read, self.wake_fd = os.pipe()  # wake_fd: also signal.set_wakeup_fd's
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self.wake_fd, False)
        self.poller = Poller(self.wake)
        self.poller.watch(self._wake_read, IN)
        self.poller.watch(door.listener.fileno(), IN)

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

    def run(self, submit: Callable[[Connection], bool], shutdown_app: Callable[[], None], grace_seconds: float,
            hurry: Latch) -> int:
        """Serve until `stopping`, handing requests to `submit`, then drain; return how many connections were
        still busy at the end. `shutdown_app` is called once the server stops."""
        self.submit = submit
        self.poller.loop_thread = threading.get_ident()
        sweep_at, trim_at, stop_at = 0.0, time.monotonic() + TRIM_SECONDS, INFINITY
        newcomers = self.door.newcomers  # waiting for a place, each with its deadline
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
                self.door.admit_waiting(now, self._room, self._open)
            if now >= sweep_at:
                self._sweep(now)
                sweep_at = now + self.sweep_seconds
                if now >= trim_at:
                    trim()
                    trim_at = now + TRIM_SECONDS
            if self.stopping.is_set():
                if stop_at == INFINITY:  # stop accepting, and let the app end its long streams
                    stop_at, sweep_at, self.rules.stopping = now + grace_seconds, now, True
                    self.poller.forget(self.door.listener.fileno())
                    self.door.stop()
                    shutdown_app()
                busy = self._close_waiting()
                if not busy or now >= stop_at or hurry.is_set():
                    return busy
                sweep_at = min(sweep_at, now + 0.05)

    def _fault(self, fd: int) -> None:
        # Found so: PyPy 7.3's ssl raises RuntimeError, not SSLError, for an error OpenSSL 3 gives no reason
        # string, and one TLS client's read took the whole server down.
        print_exception()
        conn = self.connections.get(fd)
        if conn is not None:
            self.close(conn)

    def _event(self, fd: int, events: int) -> None:
        if fd == self._wake_read:
            self._woken_up()
            return
        conn = self.connections.get(fd)
        if conn is None:
            listening = fd == self.door.listener.fileno() and not self.stopping.is_set()
            if listening and self.door.accept(self._room, self._open):  # out of descriptors: again at the sweep
                self.poller.forget(fd)
                self._paused = True
            return
        if conn.busy:
            self._watched(conn, events)
            return
        state = conn.machine.state
        if state in WAITING:
            self._readable(conn)
        elif state == WRITING:
            self._do(conn, CLOSE if events & HUNG_UP else self._write(conn))
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
            self.close(conn)
        if self.reload is not None:
            files, self.reload = self.reload, None
            self.door.reload_certificate(*files)
        for conn in ready:
            if conn.machine.state == STREAM:
                self._pump(conn)

    def _sweep(self, now: float) -> None:
        """Deadlines, each machine's to judge; push streams that have been quiet, polled."""
        if self._paused and not self.stopping.is_set():
            self._paused = False
            self.poller.watch(self.door.listener.fileno(), IN)
        with self.lock:
            connections = list(self.connections.values())
        for conn in connections:
            if conn.busy:
                continue
            machine = conn.machine
            state = machine.state
            if state == STREAM:
                if now >= conn.poll_at:
                    self._pump(conn)
            elif (state in WAITING or state == WRITING) and now >= machine.deadline:  # most have time left
                action = machine.deadline_passed(now)
                if action != NOTHING:
                    self._do(conn, action)

    # -- carrying out the machine's actions -------------------------------------------------------------

    def _readable(self, conn: Connection) -> None:
        machine = conn.machine
        if machine.state == HANDSHAKE:
            step = conn.handshake(self.would_block)
            if step == HANDSHAKE_DONE:
                machine.handshaken(time.monotonic())  # a request may have come with its last flight: read on
            elif step == NOT_TLS:
                self._do(conn, machine.answer(400, "This port speaks HTTPS: use https://"))
                return
            elif step == HANDSHAKE_FAILED:
                self.close(conn)
                return
            else:
                self.poller.arm(conn.fd, step)
                return
        try:
            data, eof = conn.receive(self.would_block, self.tls_eof)
        except OSError:
            self.close(conn)
            return
        self._do(conn, machine.received(data, eof, time.monotonic()))

    def _do(self, conn: Connection, action: str) -> None:
        """Carry out `action`, and what follows it on the loop."""
        machine = conn.machine
        while True:
            if action == WRITE:
                conn.queue(machine.outgoing)
                machine.outgoing = b""
                action = self._write(conn)
            elif action == WORK:
                with conn.lock:
                    conn.busy = True
                    with self.lock:  # no longer reclaimable: neither waiting nor (a pipelined request) writing
                        self.waiting.pop(conn, None)
                        self.writers.pop(conn, None)
                if self.submit(conn):
                    return
                with conn.lock:
                    conn.busy = False
                action = machine.answer(503, "Too many requests in progress; try again",
                                        f"Retry-After: {RETRY_AFTER_SECONDS}")
            elif action == NOTHING:
                return
            else:
                self.hand_back(conn, action)
                return

    def hand_back(self, conn: Connection, action: str) -> None:
        """The loop has `conn` from now on, after the rest of `action`: READ (an interim response first, if one is
        due), LINGER_CLOSE or CLOSE; NOTHING when its state alone says what it waits for (a slow reader, a push
        stream). The one way back from a worker, and the end of the loop's own `_do`."""
        if action == CLOSE:
            self.close(conn)
            return
        if action == READ:
            machine = conn.machine
            if machine.interim:
                send_quietly(conn, machine.take_interim())
        elif action == LINGER_CLOSE:
            shut_writing(conn)
        self.enter(conn)

    def _write(self, conn: Connection) -> str:
        """Write what the socket takes: the machine's next action once all of it is out; else the connection
        waits, a slow reader's, until the socket takes more (NOTHING)."""
        try:
            done, progressed = conn.flush(self.would_block)
        except OSError:
            return CLOSE
        machine = conn.machine
        now = time.monotonic()
        if done:
            conn.request_done()
            return machine.finished(now)
        if machine.state != WRITING:
            machine.stalled(now)
            self.enter(conn)
        else:
            if progressed:
                machine.progressed(now)
            self.poller.arm(conn.fd, conn.want)
        return NOTHING

    def _watched(self, conn: Connection, events: int) -> None:
        """An event on the socket of a request a worker runs: a hang-up, or a half-close to probe."""
        if events & HUNG_UP:
            self.hung_up(conn)
            return
        if not events & RDHUP:
            return
        with conn.lock:
            if not conn.busy:  # given back meanwhile: its new arming stands
                return
            probe = conn.machine.half_closed(bool(conn.callbacks))
            if probe:
                send_quietly(conn, probe)
            self.poller.arm(conn.fd, 0)  # from now on only a hang-up is watched for

    # -- push streams -----------------------------------------------------------------------------------

    def _pump(self, conn: Connection) -> None:
        """Ask a push stream for its next piece, unless its client has not taken the last one yet."""
        if conn.broken:
            self.close(conn)
            return
        conn.poll_at = time.monotonic() + conn.interval
        machine, response = conn.machine, conn.response
        while not conn.out and machine.state == STREAM:  # until it has nothing more, or its client is full
            try:
                piece = next(conn.stream)
            except StopIteration:
                stream, conn.stream = conn.stream, None
                close_result(stream)
                conn.queue(machine.stream_over(response["status"], response["headers"]))
                self._do(conn, self._write(conn))
                return
            except Exception:
                print_exception()
                self.close(conn)
                return
            if not piece:
                return
            self._stream_send(conn, machine.stream_piece(piece, response["status"], response["headers"]))

    def _stream_send(self, conn: Connection, data: bytes) -> None:
        conn.queue(data)
        try:
            done = conn.flush(self.would_block)[0]
        except OSError:
            self.hung_up(conn)
            return
        self.poller.arm(conn.fd, (0 if done else conn.want) | (0 if conn.machine.probed else RDHUP))

    def _stream_event(self, conn: Connection, events: int) -> None:
        if events & HUNG_UP:
            self.hung_up(conn)
            return
        machine = conn.machine
        probe = b""
        if events & RDHUP and not machine.probed:  # a half-close: find out whether the client still reads
            probe = machine.stream_probe(getattr(conn.stream, "probe", b""))
        self._stream_send(conn, probe)
        if not conn.out and machine.state == STREAM:
            self._pump(conn)  # it was held back while the client had not taken the last piece

    # -- a connection's moves ---------------------------------------------------------------------------

    def _open(self, sock: socket.socket, address: Any) -> None:
        """A newcomer with a place: the loop's from now on."""
        door = self.door
        try:
            conn = Connection(sock, address, door.tls, Machine(self.rules, door.tls is not None, time.monotonic()))
        except OSError:  # gone before it was set up
            sock.close()
            return
        with self.lock:
            self.connections[conn.fd] = conn
            self.waiting[conn] = None
        self.poller.add(conn.fd, IN)

    def enter(self, conn: Connection) -> None:
        """The loop has `conn` from now on (from the loop itself, or from the worker that had it), armed for
        what its state waits for."""
        machine = conn.machine
        with conn.lock:
            state = machine.state
            if state == CLOSED:
                return
            conn.busy = False
            with self.lock:
                if state in WAITING:
                    if conn not in self.waiting:
                        self.waiting[conn] = None
                    self.writers.pop(conn, None)
                elif state == WRITING:
                    self.waiting.pop(conn, None)
                    self.writers[conn] = None
                else:
                    self.waiting.pop(conn, None)
                    self.writers.pop(conn, None)
                newcomers = bool(self.door.newcomers)
            arm = self.poller.arm_open  # open: not closed, and its lock held
            try:  # as Poller.arm: a worker's hand-back must not end its thread, whatever the kernel says
                if state == WRITING:
                    arm(conn.fd, conn.want | ARMED)
                elif state == STREAM:
                    arm(conn.fd, (0 if machine.probed else RDHUP) | ARMED)
                else:
                    arm(conn.fd, IN | ARMED)
            except OSError:
                pass
        if newcomers and state != STREAM:
            self.wake()  # a newcomer waits for a place, and this one can now be reclaimed

    def close(self, conn: Connection) -> None:
        if not self.poller.closes_anywhere and threading.get_ident() != self.poller.loop_thread:
            with self.lock:
                self._closing.append(conn)
            self.wake()
            return
        with conn.lock:
            if not conn.machine.closed():
                return
            with self.lock:
                if self.connections.get(conn.fd) is conn:
                    del self.connections[conn.fd]
                self.waiting.pop(conn, None)
                self.writers.pop(conn, None)
                newcomers = bool(self.door.newcomers)
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
            conn.machine.hung_up()
            callbacks, conn.callbacks = conn.callbacks, []
            busy = conn.busy
        for callback in callbacks:
            try:
                callback()
            except Exception:
                print_exception()
        if not busy:
            self.close(conn)

    def _room(self) -> bool:
        """Whether a newcomer can have a place: below the bound, or by closing the connection that has waited
        longest, else the longest-stalled slow reader."""
        if len(self.connections) < self.door.max_connections:
            return True
        with self.lock:
            victim = next(iter(self.waiting), None) or next(iter(self.writers), None)
        if victim is None:
            return False
        self.close(victim)
        return True

    def crowded(self) -> bool:
        """Whether a newcomer may need the place of a connection that waits: one waits already, or the bound is
        reached."""
        return bool(self.door.newcomers) or len(self.connections) >= self.door.max_connections

    def _close_waiting(self) -> int:
        """Stopping: close every connection that waits; return how many are still open."""
        with self.lock:
            waiting = list(self.waiting)
        for conn in waiting:
            self.close(conn)
        with self.lock:
            return len(self.connections)
