"""The HTTP server's workers: a bounded pool of threads, each running whole requests the loop hands it, and
driving the connection's machine (the _machine module) while it has it.

Rules of this module:
- A whole request (head and body) runs on one of at most max_requests workers; at most max_queued more wait
  for one, and past that the loop answers 503 with Retry-After.
- The app gets a WSGI environ and, beyond WSGI: environ["mcpserver.headers"] (the header lines exactly as
  sent; the CGI-style HTTP_* keys fold "-" and "_" together), environ["mcpserver.on_disconnect"] and
  environ["mcpserver.push"] (push streams, which the loop drives). CONTENT_LENGTH is the one length the framing
  settled on.
- Screening: an app with `screen(environ)` has it called on a worker as soon as the head is in, before any
  body byte is waited for (a request that came whole, the usual case, is screened on the worker that then runs
  it, in the same hand-off); a refusal goes to the machine, and is answered without the body. An app without it
  gets the whole body read first. An accepted body that has not come whole is the loop's to wait for, so a slow
  body holds no worker.
- A request's events on the worker are its response's: the machine took its body when it came whole, so the
  worker asks it only for the response's head (respond) and tells it when all of it is out (finished). The
  usual response is one send() between the two, here; the rest of one, a large one and the machine's own
  answers go through Connection.deliver.
- Disconnects: the first on_disconnect callback arms the socket for the loop to watch while the app runs (the
  loop calls the callbacks on a hang-up, and probes a half-close).
- A worker writes what the socket takes at once, waiting up to DELIVER_WAIT for a client that reads at once,
  and leaves the rest of a whole response to the loop, so a slow reader holds no worker. An iterable that makes
  its pieces as it goes is written by its worker, blocking, piece by piece; read_timeout without progress ends
  the connection. A push stream (a result with `on_ready(wake)`) goes to the loop; on_ready runs here.
- The app raising: the machine says what follows (500, or the connection closes); the traceback goes to stderr.
  A bug of the server's own closes that connection and keeps the worker.
- Waiting only a moment, never for long: after a response a worker serves the same client's next request itself
  if it is in already or comes within KEEP_ALIVE_LINGER (not while a request waits for a worker, or a newcomer
  for a place), and reads on while an accepted body streams in within DELIVER_WAIT; a client slower than that
  is the loop's.
- Workers start on demand, up to max_requests. One idle for idle_seconds (DEFAULT_IDLE_SECONDS) exits, down
  to KEPT_WORKERS: a burst's threads do not stay for good. A job goes to the worker idle for the shortest
  time, so the others can reach that bound under a steady load. A retiring worker decides under the pool's
  lock, with no job handed to it, so a job is never left without a worker. Before the pool starts a second
  worker it bounds glibc's malloc arenas (the _malloc module): each new thread would otherwise get an arena of
  its own, up to 8 per core, each keeping its freed memory.
"""

from __future__ import annotations

import select
import socket
import sys
import threading
import time
from collections import deque

from .._malloc import LARGE_BYTES, bound_arenas
from ._connection import close_result, pending, print_exception, send_quietly
from ._machine import (
    BODY,
    CLOSE,
    CLOSED,
    IDLE,
    INFINITY,
    NOTHING,
    READ,
    WORK,
    WORKING,
    WRITE,
    chunk,
)
from ._poller import ARMED, IN, RDHUP

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Optional

    from ._connection import Connection
    from ._machine import Head
    from ._poller import Poller

__all__ = ["DEFAULT_IDLE_SECONDS", "DELIVER_WAIT", "KEEP_ALIVE_LINGER", "KEPT_WORKERS", "Input", "Worker", "Workers"]

DEFAULT_IDLE_SECONDS = 60.0  # a worker idle this long exits (down to KEPT_WORKERS)
KEPT_WORKERS = 2  # idle workers never retired: a keep-alive client and one more start no thread
# After a response, a worker waits this long for the same client's next request before it hands the
# connection to the loop: a keep-alive client's next request then costs no hand-off between threads.
KEEP_ALIVE_LINGER = 0.002
# A worker whose response fills the socket waits this long for the client to take more before it leaves
# the rest to the loop, and as long for more of an accepted body: a client that reads and sends at once
# (most) costs no hand-off between threads; one that stalls for longer is the loop's.
DELIVER_WAIT = 0.01
_RETIRED = object()  # what a worker idle past its time gets instead of a job
_GIVEN_BACK = "given back"  # what a request's run says when the loop has its connection already (a push stream)
# A header name as sent -> its environ key ("Mcp-Method" -> "HTTP_MCP_METHOD"), made once per name: building
# the key (and hashing the new string) cost more than the lookup for every header of every request.
_ENVIRON_KEYS: dict[str, str] = {}
MAX_ENVIRON_KEYS = 1024


class _Idle:
    """An idle worker's place on the pool's stack: the job handed to it, and the event that wakes it."""

    __slots__ = ("job", "woken")

    def __init__(self) -> None:
        self.job: Any = None
        self.woken = threading.Event()


class Workers:
    """At most `limit` threads run requests; at most `queue_limit` requests wait for one. A thread idle for
    `idle_seconds` exits while more than `kept` are left.

    A job goes to the worker that became idle last (a stack): under a steady load the same few workers take
    every job and the rest stay idle long enough to retire. Handed round in turn, every worker would get a
    job now and then, and a burst's threads would never go."""

    def __init__(self, limit: int, queue_limit: int, run: Callable[[Any], None], *,
                 idle_seconds: float = DEFAULT_IDLE_SECONDS, kept: int = KEPT_WORKERS):
        self.limit = limit
        self.queue_limit = queue_limit
        self.idle_seconds = idle_seconds
        self.kept = kept
        self._run = run
        self._lock = threading.Lock()
        self._jobs: deque[Any] = deque()  # waiting for a worker: only while none is idle
        self._idle: list[_Idle] = []  # the idle workers, the last to become idle on top
        self._threads = 0
        self._arenas_bounded = False

    def submit(self, job: Any) -> bool:
        """Run `job` on a worker, now or when one is free; False when the queue is full."""
        with self._lock:
            if self._idle:
                idle = self._idle.pop()
                idle.job = job
                idle.woken.set()
                return True
            if self._threads >= self.limit:
                if len(self._jobs) >= self.queue_limit:
                    return False
                self._jobs.append(job)
                return True
            self._threads += 1
            if self._arenas_bounded or self._threads == 1:
                self._start(job)
                return True
            self._arenas_bounded = True
        bound_arenas()  # before a second worker's first malloc; not under the lock, as it loads ctypes
        self._start(job)
        return True

    def _start(self, job: Any) -> None:
        threading.Thread(target=self._serve, args=(job,), name="mcpserver-worker", daemon=True).start()

    @property
    def waiting(self) -> bool:
        """Whether a request waits for a worker (a worker then does not linger on an idle connection)."""
        return bool(self._jobs)

    @property
    def threads(self) -> int:
        """The workers started and not retired."""
        return self._threads

    def _serve(self, job: Any) -> None:
        idle = _Idle()
        while job is not _RETIRED:
            self._run(job)
            job = self._next(idle)

    def _next(self, idle: _Idle) -> Any:
        """The next job: one waiting, else one handed to this worker while idle; _RETIRED once it has idled
        idle_seconds with more than `kept` left. The choice is made under the pool's lock, so a job is never
        handed to a worker that has gone."""
        with self._lock:
            if self._jobs:
                return self._jobs.popleft()
            idle.job = None
            idle.woken.clear()
            self._idle.append(idle)
        while True:
            idle.woken.wait(self.idle_seconds)
            with self._lock:
                if idle.job is not None:  # handed over (and taken off the stack) by submit()
                    return idle.job
                if self._threads > self.kept:
                    self._idle.remove(idle)
                    self._threads -= 1
                    return _RETIRED


class Worker:
    """What a worker does with the connection the loop gave it: screen the request, run the app, write its
    response, and serve the client's next request here if it has come. What it needs of the loop it is given:
    `hand_back` (the loop has the connection again, after the machine's last action), `pump_soon` (a push
    stream's wake) and `crowded`."""

    def __init__(self, app: Callable[..., Any], *, host: str, port: int, read_timeout: float, poller: Poller,
                 would_block: tuple[type[BaseException], ...], tls_eof: tuple[type[BaseException], ...],
                 hand_back: Callable[[Connection, str], None], pump_soon: Callable[[Connection], None],
                 crowded: Callable[[], bool], max_requests: int,
                 max_queued: int, idle_seconds: float = DEFAULT_IDLE_SECONDS):
        self.app = app
        self.screen: Optional[Callable[[dict[str, Any]], Any]] = getattr(app, "screen", None)
        self.host, self.port = host, port  # for the environ: where the server listens
        self.read_timeout = read_timeout
        self.poller = poller
        self.would_block, self.tls_eof = would_block, tls_eof
        self.hand_back, self.pump_soon, self.crowded = hand_back, pump_soon, crowded
        self.pool = Workers(max_requests, max_queued, self.work, idle_seconds=idle_seconds)

    def work(self, conn: Connection) -> None:
        """A worker's job: screen and run the connection's request, and the next ones it has sent already."""
        try:
            action = WORK
            while action == WORK:  # WORK again: the client's next request came, and is served here too
                action = self._respond(conn)
                action = self._carry_out(conn, action)
        except Exception:  # the server's own bug: the connection goes, the worker stays
            print_exception()
            action = CLOSE
        if action != _GIVEN_BACK:
            self.hand_back(conn, action)  # one call: the loop does what is left and has the connection

    def _screen(self, conn: Connection, environ: dict[str, Any]) -> Optional[str]:
        """The app's screen(environ) asked about the request: None to go on, else the machine's action (the screen
        refused it, or raised)."""
        assert self.screen is not None
        machine = conn.machine
        try:
            refused = self.screen(environ)
        except Exception:
            print_exception()
            return machine.failed()
        if refused is None and machine.state == WORKING:  # the usual case: a whole request, run at once
            return None
        return machine.screened(refused, time.monotonic())

    def _respond(self, conn: Connection) -> str:
        """Screen the request, if the app screens and this is its first turn here (a head that came alone, SCREEN:
        the machine says what follows; a whole one: on with it unless refused), then run the app for it (WORKING:
        its body was taken when it came whole) and write its response."""
        machine = conn.machine
        head = machine.head
        assert head is not None
        environ = conn.environ
        if environ is None:
            environ = conn.environ = self._environ(conn, head)
            if self.screen is not None:
                action = self._screen(conn, environ)
                if action is not None:
                    return action
        assert machine.body is not None
        environ["wsgi.input"] = Input(machine.body)
        response: dict[str, Any] = {}
        conn.response = response

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            response["status"], response["headers"] = status, headers
            return lambda data: None

        try:
            result = self.app(environ, start_response)
        except Exception:  # the app's own bug: answer for it, and say so where the app logs
            print_exception()
            return machine.failed()
        if hasattr(result, "on_ready"):
            self._push(conn, result)
            return _GIVEN_BACK
        return self._write(conn, head, result)

    def _write(self, conn: Connection, head: Head, result: Iterable[bytes]) -> str:
        machine = conn.machine
        try:
            chunks = iter(result)
            first = next(chunks, b"")  # start_response has been called once the first piece exists
        except Exception:
            close_result(result)
            print_exception()
            return machine.failed()
        with conn.lock:  # from now on no interim response may be sent
            data = machine.respond(conn.response["status"], conn.response["headers"])
        frame = chunk if machine.chunked else bytes
        if head.method == "HEAD" or (isinstance(result, (list, tuple)) and len(result) <= 1):
            # The whole response is known: the result is closed, and what the socket does not take, the loop writes.
            body = b"" if head.method == "HEAD" else frame(first)
            if result.__class__ is not list:  # a list (what most apps return) has no close()
                close_result(result)
            parts = [data, body, b"0\r\n\r\n" if machine.chunked and body else b""]
            if len(body) >= LARGE_BYTES:
                return self._send_whole(conn, parts)
            # The usual response: one send() here, so the machine's respond() and finished() follow each other.
            data = b"".join(parts)
            try:
                sent = conn.sock.send(data)
            except self.would_block:  # a TLS write is then repeated whole by _send_whole, as OpenSSL wants
                sent = 0
            except OSError:
                return CLOSE
            if sent < len(data):
                return self._send_whole(conn, [data[sent:]])
            with conn.lock:  # the response is out: forget what was kept for its request (Connection.request_done)
                conn.callbacks, conn.environ = [], None
            return machine.finished(time.monotonic())
        try:  # an iterable that makes its pieces as it goes: written, blocking, piece by piece
            self._send_blocking(conn, data + frame(first))
            for piece in chunks:
                if piece:
                    self._send_blocking(conn, frame(piece))
            if machine.chunked:
                self._send_blocking(conn, b"0\r\n\r\n")
        except OSError:
            return CLOSE
        finally:
            close_result(result)
        conn.request_done()
        return machine.finished(time.monotonic())

    def _carry_out(self, conn: Connection, action: str) -> str:
        """Carry out on this worker what it can of `action`: WRITE (what the socket takes now) and READ (a
        moment's wait for more). WORK when the client's next request is in and is served here; else what the loop
        is to do once it has the connection back (READ, LINGER_CLOSE, CLOSE, or NOTHING: a slow reader's)."""
        machine = conn.machine
        while True:
            if action == WRITE:
                outgoing, machine.outgoing = machine.outgoing, b""
                action = self._send_whole(conn, [outgoing])
            elif action == READ:  # the usual end of a kept-alive response: the client's next request
                action = self._read_on(conn)
                if action == READ:  # it has not come: the loop waits for it
                    return READ
            else:
                return action

    # -- writing: what the socket takes now, the rest by the loop ------------------------------------------

    def _send_whole(self, conn: Connection, parts: list[bytes]) -> str:
        """Send a whole response (an answer the machine wrote, a large one, or the rest of one): what the socket
        takes now, more while the client reads on, the rest by the loop (NOTHING: the worker goes free); then the
        machine's next action."""
        try:
            done = conn.deliver(parts, self.would_block, self._writable_soon)
        except OSError:
            return CLOSE
        if not done:
            conn.machine.stalled(time.monotonic())  # a slow reader: the loop writes the rest
            return NOTHING
        return conn.machine.finished(time.monotonic())

    def _writable_soon(self, conn: Connection) -> bool:
        """Whether a full socket takes more within DELIVER_WAIT (a TLS write may wait to read first)."""
        poll = select.poll()
        poll.register(conn.fd, select.POLLIN if conn.want == IN else select.POLLOUT)
        return bool(poll.poll(DELIVER_WAIT * 1000))

    def _send_blocking(self, conn: Connection, data: bytes) -> None:
        """Send all of `data`, waiting while the socket is full; socket.timeout after read_timeout without
        progress."""
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

    # -- reading: a moment's wait rather than a hand-off to the loop and back --------------------------------

    def _read_on(self, conn: Connection) -> str:
        """READ on a worker: the next request of a keep-alive client, or the rest of an accepted body, waited for
        a moment; the machine's next action, or READ when nothing more came (the loop then waits for it)."""
        machine = conn.machine
        if machine.interim:
            send_quietly(conn, machine.take_interim())
        lingering = machine.state == IDLE
        # A lingering worker keeps an idle connection out of reach: not while a request waits for a worker, nor at
        # the connection bound, where a newcomer may need that connection's place.
        if (lingering and not machine.buffer and not machine.peer_done
                and not (self.pool.waiting or self.crowded())):
            wait = KEEP_ALIVE_LINGER
        elif machine.state == BODY and machine.buffer:  # some of it came with the head: the rest is on its way
            wait = DELIVER_WAIT
        else:
            return READ
        while True:
            # The wait is here, not in a helper: when nothing comes (the usual end of a keep-alive request) the
            # worker goes straight back to the loop.
            if conn.tls is None or not pending(conn.sock):
                poll = select.poll()
                poll.register(conn.fd, select.POLLIN)
                if not poll.poll(wait * 1000):
                    return READ
            try:
                data, eof = conn.receive(self.would_block, self.tls_eof)
            except OSError:
                machine.hung_up()
                return CLOSE
            action = machine.received(data, eof, time.monotonic())
            if action != READ or lingering or machine.state != BODY:  # an idle client gets one look
                return action

    # -- push streams: handed to the loop -------------------------------------------------------------------

    def _push(self, conn: Connection, result: Any) -> None:
        """Hand a push stream to the loop, then give it this worker for its own work."""
        interval = getattr(result, "poll_interval", None)
        conn.interval = float(interval) if interval else INFINITY
        conn.poll_at = time.monotonic() + conn.interval
        conn.stream = result
        with conn.lock:
            if conn.machine.state == CLOSED:
                return
            conn.machine.streaming()
        self.hand_back(conn, NOTHING)
        try:
            result.on_ready(lambda: self.pump_soon(conn))
        except Exception:
            print_exception()
            conn.broken = True
            self.pump_soon(conn)

    # -- the environ, and the disconnect watch it offers ---------------------------------------------------

    def _environ(self, conn: Connection, head: Head) -> dict[str, Any]:
        path, _, query = head.target.partition("?")
        if path.startswith(("http://", "https://")):  # absolute-form: what a proxy sends
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        content_type = content_length = ""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": head.method, "SCRIPT_NAME": "", "PATH_INFO": _unquote(path),
            "QUERY_STRING": query, "RAW_URI": head.target, "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port), "SERVER_PROTOCOL": "HTTP/" + head.version,
            "REMOTE_ADDR": str(conn.address[0]) if conn.address.__class__ is tuple else "", "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if conn.tls is not None else "http", "wsgi.input": Input(b""),
            "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
            "mcpserver.headers": head.headers, "mcpserver.push": True,
            "mcpserver.on_disconnect": lambda callback: self._watch(conn, callback),
        }
        keys = _ENVIRON_KEYS
        for name, value in head.headers:
            key = keys.get(name)
            if key is None:
                key = "HTTP_" + name.upper().replace("-", "_")
                if len(keys) < MAX_ENVIRON_KEYS:  # names come from clients: only so many are kept
                    keys[name] = key
            if key == "HTTP_CONTENT_TYPE":
                content_type = value
            elif key == "HTTP_CONTENT_LENGTH":
                content_length = value
            else:
                environ[key] = f"{environ[key]},{value}" if key in environ else value
        environ["CONTENT_TYPE"] = content_type
        environ["CONTENT_LENGTH"] = str(head.length) if content_length else ""  # the one value framing settled on
        return environ

    def _watch(self, conn: Connection, callback: Callable[[], None]) -> None:
        """environ["mcpserver.on_disconnect"]: the first callback starts the loop's watch on the socket."""
        machine = conn.machine
        with conn.lock:
            if not machine.gone:
                conn.callbacks.append(callback)
                if len(conn.callbacks) == 1 and machine.state == WORKING:  # open, and its lock held
                    self.poller.arm_open(conn.fd, (0 if machine.probed else RDHUP) | ARMED)
                return
        callback()

    def shutdown_app(self) -> None:
        """The server stops: the app's shutdown(), if it has one, ends its long-lived streams (subscriptions)
        now, so the drain need not wait for them."""
        shutdown = getattr(self.app, "shutdown", None)
        if shutdown is not None:
            try:
                shutdown()
            except Exception:
                print_exception()


class Input:
    """wsgi.input: the body, read by the server before the app runs."""

    __slots__ = ("_data", "_offset")

    def __init__(self, data: bytes):
        self._data = data
        self._offset = 0

    def read(self, size: Optional[int] = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._offset + size
        chunk = self._data[self._offset:end]
        self._offset += len(chunk)
        return chunk

    def readline(self, size: Optional[int] = -1) -> bytes:
        end = self._data.find(b"\n", self._offset) + 1 or len(self._data)
        if size is not None and size >= 0:
            end = min(end, self._offset + size)
        chunk = self._data[self._offset:end]
        self._offset += len(chunk)
        return chunk

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")


def _unquote(path: str) -> str:
    if "%" not in path:
        return path
    from urllib.parse import unquote

    return unquote(path, "latin-1")
