"""The stdio transport: one JSON-RPC message per line in, one per line out (WIRE.md §15).

Rules of this module:
- stdout carries protocol lines only. The protocol writes to a private duplicate of fd 1, and fd 1
  itself is pointed at stderr, so a tool that prints (from Python, C or a child process) can only
  reach the log. fd 0 is the protocol's alone too: tools and their children read /dev/null.
- Reading never stops for long while calls run. A request that runs the server author's code (tools/call,
  prompts/get, resources/read) runs on the reader's own thread when a slot is free; once it has run for
  HAND_OFF_AFTER, reading goes on in a new thread. At most max_concurrent run at once; beyond that they
  wait in a queue, in order, and the reader goes on, so a cancel (or any notification) is acted on at
  once even when every slot is taken. Only past MAX_WAITING_CALLS queued calls does the reader wait;
  input is never dropped or reordered. Other requests are answered by the reader itself. Responses
  come out in completion order; ids pair them.
- One writer: every response and notification is written whole, as one line, under one lock. An answer
  made while the next request is already read may wait to go out in one write with the answers after
  it (at most HOLD_BYTES): never while the reader waits for input, nor past the next call's hand-off.
- notifications/cancelled naming a request in flight cancels it: its tool is told, and nothing
  more is sent for it, not even a response; a queued call is dropped. A cancel for an unknown or finished id, or a
  malformed one, is ignored; no notification is ever answered.
- Blank lines are skipped, a trailing CR is dropped, a last line without a newline is still
  answered. A line longer than MAX_LINE_BYTES is discarded and answered with an error.
- EOF: stop reading, answer everything that was read, exit 0. SIGTERM/SIGINT: stop reading, let
  requests in flight finish within grace_seconds, cancel the rest, exit 0; a second signal
  cancels them at once. A closed stdout ends the server quietly.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque

from . import _log, protocol
from ._context import Flight
from ._json import THREAD_STACK_BYTES
from ._latch import Latch
from ._malloc import LARGE_BYTES, return_large_buffers
from ._server import Server
from ._wire import DEFAULT_GRACE_SECONDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO, Optional, Union
    Writer = Union[BinaryIO, "_FdWriter"]

    from .legacy import LegacyPeer
if TYPE_CHECKING:
    import signal
else:
    try:  # the C module: signal.py wraps every constant in an enum, which costs start-up
        import _signal as signal
    except ImportError:  # an interpreter without it (PyPy)
        import signal

__all__ = ["DEFAULT_GRACE_SECONDS", "DEFAULT_MAX_CONCURRENT", "MAX_LINE_BYTES", "serve_stdio"]

log = _log.get("mcpserver.stdio")

MAX_LINE_BYTES = 64 * 1024 * 1024  # room for a 5 MB payload even when JSON escapes make it 6x longer
DEFAULT_MAX_CONCURRENT = 16  # requests running the author's code at once; the reader waits beyond it
HAND_OFF_AFTER = 0.01  # seconds a call may hold the reader before reading moves to another thread
HOLD_BYTES = 65536  # answers held to go out together (write_answer): at most this much, what a pipe takes at once
# Calls read while every slot is taken wait here, so reading (and cancelling) goes on; past these the
# reader waits too, which bounds what a client that writes faster than calls finish can make us hold.
MAX_WAITING_CALLS = 1024
MAX_WAITING_BYTES = 64 * 1024 * 1024


class _LogWriter:
    """Stands in for sys.stdout while serving: what tools print goes to the log, line by line.

    A write without a newline (a progress bar's "\\r3/10") is only kept, so many of them cost linear
    time; a partial line longer than MAX_PARTIAL_LINE is logged as it is rather than held without end.
    """

    MAX_PARTIAL_LINE = 64 * 1024

    def __init__(self, logger: _log.Logger):
        self._logger = logger
        self._pending: list[str] = []
        self._pending_size = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            if "\n" not in text:
                self._pending.append(text)
                self._pending_size += len(text)
                if self._pending_size > self.MAX_PARTIAL_LINE:
                    self._emit("".join(self._pending))
            else:
                first, *middle, last = text.split("\n")
                self._emit("".join(self._pending) + first)
                for line in middle:
                    self._logger.info("%s", line)
                if last:
                    self._pending, self._pending_size = [last], len(last)
        return len(text)

    def _emit(self, line: str) -> None:
        self._pending, self._pending_size = [], 0
        self._logger.info("%s", line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._emit("".join(self._pending))

    def isatty(self) -> bool:
        return False


class _FdWriter:
    """Unbuffered writes of whole messages to a file descriptor.

    Every message is flushed at once anyway, and a buffer left holding an unsent response when the
    reader has gone makes Python 3.13+ report an ignored BrokenPipeError at exit.
    """

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> int:
        written = os.write(self.fd, data)
        if written == len(data):  # a pipe takes a whole small message at once
            return written
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(self.fd, view):]
        return len(data)

    def flush(self) -> None:
        pass


class _Lines:
    """Lines of a binary stream, read a chunk at a time, with what is already in memory in view: ready()
    says whether the next line can be had without waiting for the client, which is when an answer may
    wait to go out with the next ones (_Session.write_answer)."""

    __slots__ = ("_chunk", "_end", "_read", "_start")
    CHUNK = 8192  # BufferedReader's own: a read allocates this much, and 64 KiB would be mapped apart (_malloc)

    def __init__(self, stream: BinaryIO):
        self._read = getattr(stream, "read1", stream.read)  # at most one system call, what is there
        self._chunk = b""
        self._start = 0  # where the next line begins in _chunk
        self._end = -1  # where its newline is, once found (-1: not looked for or not there)

    def ready(self) -> bool:
        if self._end < 0:
            self._end = self._chunk.find(b"\n", self._start)
        return self._end >= 0

    def readline(self, limit: int) -> bytes:
        """The next line with its newline, or the first `limit` bytes of a longer one, or what is left at EOF."""
        start = self._start
        end = self._end if self._end >= 0 else self._chunk.find(b"\n", start)
        self._end = -1
        if 0 <= end < start + limit:
            self._start = end + 1
            return self._chunk[start:end + 1]
        if start == len(self._chunk):  # nothing in memory: a lock-step client's case
            data = self._read(self.CHUNK)
            end = data.find(b"\n", 0, limit)
            if end == len(data) - 1:  # one whole line as it came (or b"" at EOF): no slice, no join
                self._chunk, self._start = b"", 0
                return data
            self._chunk, self._start = data, 0
            if end >= 0:
                self._start = end + 1
                return data[:end + 1]
            start = 0
        parts, size = [self._chunk[start:start + limit]], min(len(self._chunk) - start, limit)
        self._chunk, self._start = self._chunk[start + size:], 0
        while size < limit and not self._chunk:
            data = self._read(self.CHUNK)
            if not data:
                break
            end = data.find(b"\n", 0, limit - size)
            take = end + 1 if end >= 0 else min(len(data), limit - size)
            parts.append(data[:take] if take < len(data) else data)
            size += take
            self._chunk = data[take:] if take < len(data) else b""
            if end >= 0:
                break
        return b"".join(parts)


def _protocol_stream() -> _FdWriter:
    """Take fd 1 for the protocol alone and point fd 1 (and sys.stdout) at the log."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = _LogWriter(_log.get("mcpserver.tool.stdout"))
    return _FdWriter(protocol_fd)


def _protocol_input() -> BinaryIO:
    """Take fd 0 for the protocol alone and point fd 0 (and sys.stdin) at /dev/null.

    Otherwise a tool reading sys.stdin, or a child it starts without stdin=DEVNULL, reads the
    client's next requests, which are then lost.
    """
    protocol_fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, closefd=False, encoding="utf-8")  # noqa: SIM115  fd 0 lives as long as the process
    return os.fdopen(protocol_fd, "rb")


class _Session:
    """What the reader threads share: the writer, the requests in flight, the slots, the reader role.

    One thread at a time holds the reader role: it reads a line and, for a request that runs the
    author's code, runs it itself, so a quick call costs no hand-off between threads. When a call
    has run longer than HAND_OFF_AFTER, the watcher gives the role to a new thread, which goes on
    reading; the old one finishes its call and ends. A slow tool delays reading by that much only.
    """

    def __init__(self, server: Server, reader: BinaryIO, writer: Writer, max_concurrent: int):
        self.server = server
        self.lines = _Lines(reader)
        self.writer = writer
        self._held: list[bytes] = []  # answers waiting to go out with the next ones (write_answer)
        self._held_bytes = 0
        self._reader_ident = 0  # the thread holding the reader role, as threading.get_ident() says
        self.closed = False  # stdout has gone
        self.stopping = False  # a signal came: read no more
        self.ended = Latch()  # EOF, a closed stdout, or a signal: the main thread takes over
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()  # the flights, the running count and the reader role
        self._changed = threading.Condition(self._lock)  # a slot freed, or the last call ended
        self._flights: dict[Any, list[Flight]] = {}
        self._running = 0  # calls running the author's code: at most max_concurrent
        self._waiting = 0  # threads waiting on _changed: without any, a finished call need not notify
        self._queue: deque[tuple[protocol.Request, Flight, int]] = deque()  # calls read while every slot is taken
        self.peer: Optional[LegacyPeer] = None  # the legacy session an initialize opened: the process's
        self._queued_bytes = 0
        self._listens = 0  # open subscriptions/listen streams
        self._max_concurrent = max_concurrent
        self._reader_thread: Optional[threading.Thread] = None
        self._inline = 0  # which call the reader is running itself (0: none), counted from 1
        self._calls = 0
        self._busy = threading.Event()  # the reader started running a call: the watcher should look
        self._watched = False  # _busy is set, or about to be (under _lock, with the watcher's clear)

    def start(self) -> None:
        with self._lock:
            self._reader_thread = self._new_reader()
        threading.Thread(target=self._watch, name="mcpserver-stdio-watch", daemon=True).start()

    def _new_reader(self) -> threading.Thread:
        thread = threading.Thread(target=self._read, name="mcpserver-stdio-reader", daemon=True)
        thread.start()
        return thread

    # -- writing ------------------------------------------------------------------------------------

    def write(self, message: dict[str, Any]) -> None:
        """Send a message now, after any answers held before it."""
        self._send(protocol.encode(message), hold=False)

    def write_answer(self, message: dict[str, Any]) -> None:
        """Send an answer, or, on the reader's thread while the next request is already in memory, hold it
        to go out in one write with the answers after it. A client that reads as fast as it is answered is
        otherwise woken once per answer, which cost pipelined echo a third of its throughput (0.41x the bare
        loop against 0.58x, measured). Nothing is held while the reader would wait for input (_read sends
        it first), nor past the call the reader runs next: its end, or its hand-off (HAND_OFF_AFTER)."""
        self._send(protocol.encode(message), hold=True)

    def send_held(self) -> None:
        with self._write_lock:
            if self._held:
                self._send_locked(None)

    def _send(self, data: bytes, hold: bool) -> None:
        if len(data) >= LARGE_BYTES:  # before the lock: the first time loads ctypes
            return_large_buffers()
        with self._write_lock:
            self._put(data, hold)

    def _put(self, data: bytes, hold: bool) -> None:
        """_send with the write lock held: what a call's flight, which shares the lock, answers with."""
        if hold and self._held_bytes + len(data) < HOLD_BYTES and threading.get_ident() == self._reader_ident \
                and self.lines.ready():
            self._held.append(data + b"\n")
            self._held_bytes += len(data) + 1
            return
        self._send_locked(data)

    def _notify(self, message: dict[str, Any]) -> None:
        """A call's notification, sent under its flight's lock, which is the write lock."""
        data = protocol.encode(message)
        if len(data) >= LARGE_BYTES:
            return_large_buffers()
        self._put(data, False)

    def _send_locked(self, data: Optional[bytes]) -> None:
        """Write the held answers and `data` (with the write lock held): one write for what is small, no copy
        of what is large."""
        held = self._held
        if data is not None and len(data) < 65536:
            held.append(data + b"\n")
            data = None
        try:
            if not self.closed:
                if held:
                    self.writer.write(b"".join(held))
                if data is not None:
                    self.writer.write(data)
                    self.writer.write(b"\n")
                self.writer.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            log.info("stdout closed (%s); exiting", exc.__class__.__name__)
            self.closed = True
            self.ended.set()
        finally:
            held.clear()
            self._held_bytes = 0

    # -- reading ------------------------------------------------------------------------------------

    def _read(self) -> None:
        """The reader role: read and handle lines until EOF, a stop, or the role passes on."""
        me = threading.current_thread()
        self._reader_ident = threading.get_ident()
        try:
            while not (self.stopping or self.closed):
                if self._held and not self.lines.ready():  # the client may be waiting for them
                    self.send_held()
                line = self.lines.readline(MAX_LINE_BYTES + 1)
                if self.stopping:
                    return  # read after the signal: not answered
                if not line:
                    return
                if len(line) >= LARGE_BYTES:
                    return_large_buffers()
                if len(line) > MAX_LINE_BYTES:  # skip the rest of a cut line: it is still refused whole, by its length
                    rest = line
                    while rest and not rest.endswith(b"\n"):
                        rest = self.lines.readline(MAX_LINE_BYTES)
                if not self._receive(line, me):
                    return  # the role went to another thread while this one ran a call
        except (OSError, ValueError) as exc:  # stdin itself broke: as good as EOF
            log.info("stdin failed (%s); exiting", exc)
        finally:
            self.send_held()
            with self._lock:
                if self._reader_thread is me:
                    self.ended.set()
                    self._busy.set()  # lets the watcher end

    def _receive(self, line: bytes, me: threading.Thread) -> bool:
        """Handle one line: answer it, run it, queue it, or act on a cancel. False when this thread lost
        the reader role while it ran a call."""
        line = line.rstrip(b"\r\n")  # one newline at most, at the end (readline), after any CRs
        if not line or line.isspace():  # blank: skipped, where strip() would have copied every line read
            return True
        message = protocol.parse(line, MAX_LINE_BYTES)
        if isinstance(message, protocol.Request):
            if message.work == protocol.AUTHOR:
                return self._call(message, me, len(line))
            if message.work == protocol.LISTEN:
                self._listen(message)
            else:
                self._quick(message)
        elif isinstance(message, protocol.Cancel):
            self.cancel(message.request_id)
        elif isinstance(message, protocol.Refusal):
            self._answer(message.reply)
        elif isinstance(message, protocol.ClientResponse):
            if self.peer is not None:  # the answer to one of the server's own requests, if it asked
                self.peer.answer(message)
        elif message.method == "notifications/initialized" and self.peer is not None:
            self.peer.initialized = True
        return True  # nothing else is ever answered

    def _quick(self, request: protocol.Request) -> None:
        """A request answered here at once; an initialize makes this process a legacy session (LEGACY.md §1.1)."""
        reply = protocol.dispatch(request, self.server, peer=self.peer)
        if reply.session is not None:
            from . import legacy  # imported here: only a legacy client's process pays for it

            self.peer = legacy.LegacyPeer(self.server, reply.session, self.write)
            log.info("legacy session: protocol %s with %s", reply.session.revision,
                     reply.session.client_info.get("name", "an unnamed client"))
        self._answer(reply)

    def _listen(self, request: protocol.Request) -> None:
        """A subscriptions/listen stream: outside the slots for calls (the server's listener limit bounds
        these), and no thread waits for it: its end calls back. It ends when cancelled, or at shutdown or its
        time bound (--max-listen-seconds) with its graceful result, followed by notifications/cancelled for
        its id (WIRE.md §14.1)."""
        flight = Flight(self.write)
        with self._lock:
            self._flights.setdefault(request.id, []).append(flight)
            self._listens += 1
        reply = protocol.dispatch(request, self.server, flight=flight)  # opens it and acknowledges, at once
        if reply.listening is None:  # refused
            flight.finish(lambda: self._answer(reply))
            self._stream_ended(request.id, flight)
            return
        listening = reply.listening

        def ended() -> None:  # on the thread that cancelled it, or shutdown's
            try:
                final = listening.close()
                if final.response is not None and flight.finish(lambda: self._answer(final)):
                    self.write({"jsonrpc": "2.0", "method": "notifications/cancelled",  # shutdown, or its time bound
                                "params": {"requestId": request.id, "reason": "the server ended the subscription"}})
                else:
                    flight.finish()
            finally:
                self._stream_ended(request.id, flight)

        listening.on_end(ended)

    def _stream_ended(self, request_id: Any, flight: Flight) -> None:
        with self._changed:
            self._forget(request_id, flight)
            self._listens -= 1
            self._changed.notify_all()

    def _forget(self, request_id: Any, flight: Flight) -> None:
        flights = self._flights.get(request_id, [])
        if flight in flights:
            flights.remove(flight)
        if not flights:
            self._flights.pop(request_id, None)

    def _answer(self, reply: protocol.Reply) -> None:
        if reply.response is not None:
            self.write_answer(reply.response)

    def _call(self, request: protocol.Request, me: threading.Thread, size: int) -> bool:
        """A request that runs the author's code: run it here when a slot is free (as the reader's own
        call), else queue it and go on reading, so a cancel behind it is still read. Only when
        MAX_WAITING_CALLS (or MAX_WAITING_BYTES) are queued does the reader wait. False when this thread
        lost the reader role while it ran the call."""
        flight = Flight(self._notify, lock=self._write_lock)
        with self._lock:  # _changed's own lock, taken without Condition.__enter__'s extra Python call
            self._flights.setdefault(request.id, []).append(flight)  # 1 and "1" are different keys
            if self._running >= self._max_concurrent:
                while (len(self._queue) >= MAX_WAITING_CALLS or self._queued_bytes + size > MAX_WAITING_BYTES) \
                        and self._queue and not (self.stopping or self.closed):
                    self._waiting += 1  # a freed slot or queue place, or the last call's end, notifies
                    try:
                        self._changed.wait(0.1)
                    finally:
                        self._waiting -= 1
                self._queue.append((request, flight, size))
                self._queued_bytes += size
                return True
            self._running += 1
            self._calls += 1
            self._inline = call = self._calls
            wake = not self._watched  # a plain flag (Event.is_set() is a Python call), kept under the lock
            self._watched = True
        if wake:
            self._busy.set()
        return self._run(request, flight, call, me)

    def _run(self, request: protocol.Request, flight: Flight, call: int = 0,
             me: Optional[threading.Thread] = None) -> bool:
        """Run one call: the reader's own (`call` its number, `me` the reader's thread), or a queued one, on a
        thread of its own. Its slot then goes to the oldest call still queued. Whether `me` is still the
        reader: one round of the lock ends the call, frees its slot and says so."""
        try:
            reply = protocol.dispatch(request, self.server, flight=flight, peer=self.peer)
            if reply.response is None:
                flight.finish()
            else:  # encoded first: under the write lock, which the flight's is, only the write happens
                data = protocol.encode(reply.response)
                if len(data) >= LARGE_BYTES:
                    return_large_buffers()
                flight.finish(self._put, data, True)
        finally:
            with self._lock:
                if call and self._inline == call:  # else the role has passed on, and _inline is another reader's
                    self._inline = 0
                self._forget(request.id, flight)
                queued = self._next_queued() if self._queue else None
                if queued is None:
                    self._running -= 1
                if self._waiting:
                    self._changed.notify_all()  # a reader waiting for room, or the main thread for the end
                reader = self._reader_thread is me
            if queued is not None:
                threading.Thread(target=self._run, args=queued, name="mcpserver-call", daemon=True).start()
        return reader

    def _next_queued(self) -> Optional[tuple[protocol.Request, Flight]]:
        """The oldest queued call still wanted (the lock held); none once a signal came."""
        while self._queue:
            request, flight, size = self._queue.popleft()
            self._queued_bytes -= size
            if not (flight.cancelled or self.stopping):
                return request, flight
            self._forget(request.id, flight)
        return None

    def _watch(self) -> None:
        """Hand the reader role to a new thread when the reader has run one call for HAND_OFF_AFTER."""
        while not self.ended.is_set():
            with self._lock:
                call = self._inline
                if not call:
                    if self.ended.is_set():
                        return
                    # Idle: both cleared under the lock that _call sets the flag under, so the next call's set()
                    # comes after this clear. Cleared apart, the clear could wipe that set and the flag stay
                    # up, and no slow call would ever be handed off again.
                    self._busy.clear()
                    self._watched = False
            if not call:
                self._busy.wait()
                continue
            time.sleep(HAND_OFF_AFTER)
            with self._lock:
                if self._inline == call and not self.ended.is_set():
                    self._inline = 0
                    self._reader_ident = 0  # the slow call's thread holds no more answers; the new reader sends
                    self._reader_thread = self._new_reader()  # those held behind it before it waits for input

    # -- cancelling and ending ----------------------------------------------------------------------

    def cancel(self, request_id: Any) -> None:
        with self._lock:
            flights = list(self._flights.get(request_id, ()))
            if self._queue:  # a queued call is dropped whole: it never runs or answers
                for entry in [entry for entry in self._queue if entry[0].id == request_id]:
                    self._queue.remove(entry)
                    self._queued_bytes -= entry[2]
                    self._forget(request_id, entry[1])
        for flight in flights:
            log.info("request %r cancelled by the client", request_id)
            flight.cancel()

    def cancel_all(self) -> int:
        with self._lock:
            flights = [flight for group in self._flights.values() for flight in group]
        for flight in flights:
            flight.cancel()
        return len(flights)

    def wait_idle(self, seconds: Optional[float]) -> bool:
        """Wait until no call runs and no listen stream is open, for at most `seconds` (None: without
        limit); whether that is so."""
        with self._changed:
            self._waiting += 1
            try:
                return self._changed.wait_for(lambda: self._running == 0 and self._listens == 0, seconds)
            finally:
                self._waiting -= 1


def serve_stdio(server: Server, stdin: Optional[BinaryIO] = None, stdout: Optional[Writer] = None, *,
                max_concurrent: int = DEFAULT_MAX_CONCURRENT, grace_seconds: float = DEFAULT_GRACE_SECONDS) -> int:
    """Serve `server` on stdin/stdout until EOF or a signal; return the exit status (0).

    With the default streams the process's own fds 0 and 1 are taken over (see the module
    docstring); pass streams to serve anything else, as tests do.
    """
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be at least 1, not {max_concurrent!r}")
    server.middleware.trace_if_configured()
    reader = stdin if stdin is not None else _protocol_input()
    writer = stdout if stdout is not None else _protocol_stream()
    threading.stack_size(THREAD_STACK_BYTES)
    session = _Session(server, reader, writer, max_concurrent)
    signals = [0]

    def on_signal(signum: int, frame: Any) -> None:
        signals[0] += 1
        session.stopping = True
        session.ended.set()

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[signum] = signal.signal(signum, on_signal)
        except ValueError:  # not the main thread: the embedding application owns signals
            pass
    starting = getattr(previous.get(signal.SIGTERM), "served", None)
    if starting is not None:  # the command line's start-up handler (mcpserver.__main__): serving begins here
        starting()
    log.info("serving %s %s over stdio", server.name, server.version)
    try:
        session.start()
        # In slices: a signal the kernel hands to another thread must still reach this one's handler, and a
        # free-threaded CPython (3.13t) does not wake a main thread parked on a lock for it
        # (docs/platforms/free-threading.md).
        while not session.ended.wait(0.5):
            pass
        _finish(session, signals, grace_seconds)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    log.info("stdio closed; exiting")
    return 0


def _finish(session: _Session, signals: list[int], grace_seconds: float) -> None:
    """Answer what was read: all of it after EOF; what finishes within the grace after a signal. Listen
    streams end at once, with their graceful result; calls waiting for a legacy client's answer, which
    can no longer come, stop waiting."""
    session.server.subscriptions.end_all()
    if session.peer is not None:
        session.peer.close()
    deadline: Optional[float] = None
    while not session.closed and signals[0] < 2:
        if signals[0] and deadline is None:
            deadline = time.monotonic() + grace_seconds
        wait = 0.1 if deadline is None else min(0.1, max(0.0, deadline - time.monotonic()))
        if session.wait_idle(wait) or (deadline is not None and time.monotonic() >= deadline):
            break
    left = session.cancel_all()
    if left:
        log.warning("exiting with %d request(s) cancelled", left)
    session.server.shutdown()
