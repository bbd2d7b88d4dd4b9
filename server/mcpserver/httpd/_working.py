"""The HTTP server's workers: a bounded pool of threads, each running whole requests the loop hands it.

Rules of this module:
- A whole request (head and body) runs on one of at most max_requests workers; at most max_queued more wait
  for one, and past that the request is answered 503 with Retry-After.
- The app gets a WSGI environ and, beyond WSGI: environ["mcpserver.headers"] (the header lines exactly as
  sent; the CGI-style HTTP_* keys fold "-" and "_" together), environ["mcpserver.on_disconnect"] and
  environ["mcpserver.push"] (the _pushing module). CONTENT_LENGTH is the one length the framing settled on.
- Screening: an app with `screen(environ)` has it called on a worker as soon as the head is in, before any
  body byte is waited for. A (status, headers, body) it returns is the answer and the body is never read (a
  small one on its way is skipped by the loop to keep the connection; the _writing module). An app without
  it gets the whole body read first, at most max_body_bytes. An accepted body that has not come whole is the
  loop's to wait for, so a slow body holds no worker.
- Disconnects: while a request runs, the loop watches its socket once the app asks (on_disconnect). A
  hang-up (RST, both directions closed, a failed write) calls the callbacks; a half-close (FIN) does not,
  since the client may still read: the server then sends an interim `100 Continue` (HTTP/1.1, before the
  response), which a peer that is really gone answers with an RST.
- The app raising is answered 500 when nothing of its response went out yet, else the connection closes;
  either way the traceback goes to stderr. A bug of the server's own closes that connection and keeps the
  worker.
- After a response a worker serves the same client's next request itself if it is in already or comes
  within KEEP_ALIVE_LINGER (not waited for while a request waits for a worker, or a newcomer for a place);
  else the connection is the loop's again.
- Workers start on demand, up to max_requests. One idle for idle_seconds (DEFAULT_IDLE_SECONDS) exits, down
  to KEPT_WORKERS: a burst's threads do not stay for good. A job goes to the worker idle for the shortest
  time, so the others can reach that bound under a steady load. A retiring worker decides under the pool's
  lock, with no job handed to it, so a job is never left without a worker. Before the pool starts a second worker it
  bounds glibc's malloc arenas (the _malloc module): each new thread would otherwise get an arena of its own,
  up to 8 per core, each keeping its freed memory.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque

from .._malloc import LARGE_BYTES, bound_arenas, return_large_buffers
from ._connection import BODY, CLOSED, HEAD, IDLE, QUEUED, SCREEN, WORKING, close_result, print_exception
from ._head import HttpError
from ._poller import HUNG_UP, RDHUP
from ._reading import TOO_LARGE
from ._writing import CONTINUE, chunk, refusal, response_head, send_quietly

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Optional

    from ._accepting import Acceptor
    from ._connection import Connection
    from ._head import Head
    from ._loop import Loop
    from ._pushing import Pusher
    from ._reading import Reader
    from ._writing import Writer

__all__ = ["DEFAULT_IDLE_SECONDS", "KEPT_WORKERS", "Input", "Worker", "Workers"]

DEFAULT_IDLE_SECONDS = 60.0  # a worker idle this long exits (down to KEPT_WORKERS)
KEPT_WORKERS = 2  # idle workers never retired: a keep-alive client and one more start no thread
_RETIRED = object()  # what a worker idle past its time gets instead of a job
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
    """What a worker does with the connection the loop gave it: screen the request, run the app, start its
    response, and serve the client's next request here if it has come."""

    def __init__(self, app: Callable[..., Any], *, host: str, port: int, max_requests: int, max_queued: int,
                 max_body_bytes: int, idle_seconds: float = DEFAULT_IDLE_SECONDS):
        self.app = app
        self.screen: Optional[Callable[[dict[str, Any]], Any]] = getattr(app, "screen", None)
        self.host, self.port = host, port  # for the environ: where the server listens
        self.max_body_bytes = max_body_bytes
        self.workers = Workers(max_requests, max_queued, self.work, idle_seconds=idle_seconds)

    def join(self, loop: Loop, acceptor: Acceptor, reader: Reader, writer: Writer, pusher: Pusher) -> None:
        """The roles a request runs through: the loop's moves and watch, the acceptor's bound, the reader,
        the writer and the push streams."""
        self.poller, self.stopping = loop.poller, loop.stopping
        self.loop, self.acceptor, self.reader, self.writer, self.pusher = loop, acceptor, reader, writer, pusher

    def work(self, conn: Connection) -> None:
        """A worker's job: screen and run the connection's request, and the next ones it has sent already."""
        try:
            step: Optional[str] = conn.state
            while step in (SCREEN, QUEUED):
                if step == SCREEN:
                    step = self._screen(conn)
                if step == QUEUED:
                    step = self._respond(conn)
        except Exception:  # the server's own bug: the connection goes, the worker stays
            self.loop.drop(conn)

    def _screen(self, conn: Connection) -> Optional[str]:
        assert self.screen is not None and conn.head is not None
        head = conn.head
        environ = conn.environ = self._environ(conn, head)
        try:
            refusal = self.screen(environ)
        except Exception:
            return self._failed(conn)
        if refusal is not None:
            return self.writer.refused(conn, head, refusal)
        if head.length > self.max_body_bytes:
            return self.writer.refused(conn, head, self.writer.too_large())
        if head.expect_continue and len(conn.buffer) < head.length:
            send_quietly(conn, CONTINUE)
        if self.reader.body_soon(conn, head.length):
            return QUEUED
        if conn.peer_done:
            self.loop.close(conn)
            return None
        self.loop.enter(conn, BODY)
        return None

    def _respond(self, conn: Connection) -> Optional[str]:
        """Run the app for the request and start its response."""
        head = conn.head
        assert head is not None
        environ = conn.environ or self._environ(conn, head)
        if head.length >= LARGE_BYTES:
            return_large_buffers()
        if len(conn.buffer) == head.length:
            body, conn.buffer = bytes(conn.buffer), bytearray()
        else:
            body = bytes(conn.buffer[:head.length])
            del conn.buffer[:head.length]
        environ["wsgi.input"] = Input(body)
        response: dict[str, Any] = {}
        conn.response = response

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            response["status"], response["headers"] = status, headers
            return lambda data: None

        with conn.lock:  # a FIN that came with the request is still seen by the watch, and probed
            conn.state, conn.started, conn.probed = WORKING, False, False
        try:
            result = self.app(environ, start_response)
        except Exception:  # the app's own bug: answer for it, and say so where the app logs
            return self._failed(conn)
        keep = head.keep_alive and not conn.peer_done and not self.stopping.is_set()
        if hasattr(result, "on_ready"):
            self.pusher.push(conn, result, keep)
            return None
        return self._write(conn, head, result, keep)

    def _failed(self, conn: Connection) -> Optional[str]:
        """The app raised: say so where it logs, and answer 500 if nothing of the response went out yet."""
        print_exception()
        if conn.started:
            self.loop.close(conn)
        else:
            self.writer.answer_and_close(conn, refusal(500, "Internal server error"))
        return None

    def _write(self, conn: Connection, head: Head, result: Iterable[bytes], keep: bool) -> Optional[str]:
        try:
            chunks = iter(result)
            first = next(chunks, b"")  # start_response has been called once the first piece exists
        except Exception:
            close_result(result)
            return self._failed(conn)
        data, chunked, keep = response_head(head, conn.response, keep)
        after = IDLE if keep else CLOSED
        frame = chunk if chunked else bytes
        if head.method == "HEAD" or (isinstance(result, (list, tuple)) and len(result) <= 1):
            close_result(result)  # the whole response is known: what the socket does not take, the loop writes
            body = b"" if head.method == "HEAD" else frame(first)
            return self.writer.deliver(conn, [data, body, b"0\r\n\r\n" if chunked and body else b""], after)
        with conn.lock:
            conn.started = True
        try:  # an iterable that makes its pieces as it goes: written, blocking, piece by piece
            self.writer.send_blocking(conn, data + frame(first))
            for piece in chunks:
                if piece:
                    self.writer.send_blocking(conn, frame(piece))
            if chunked:
                self.writer.send_blocking(conn, b"0\r\n\r\n")
        except OSError:
            self.loop.close(conn)
            return None
        finally:
            close_result(result)
        return self.after(conn, after)

    def after(self, conn: Connection, after: str) -> Optional[str]:
        """The response is out (on the worker): the next request, here if it has come, else to the loop."""
        if threading.get_ident() == self.poller.loop_thread:  # the server's own answer, from the loop
            self.writer.then(conn, after)
            return None
        if after != IDLE or conn.gone or self.stopping.is_set():
            self.writer.then(conn, CLOSED if after == IDLE else after)
            return None
        conn.request_done()
        conn.waiting_since = time.monotonic()
        if not conn.buffer and not conn.peer_done and self._may_linger():
            self.reader.wait_for_next(conn)
        try:
            step = self.reader.next_step(conn)
        except HttpError as refused:
            self.writer.answer_and_close(conn, refusal(refused.status, refused.message))
            return None
        if step == TOO_LARGE:
            assert conn.head is not None
            return self.writer.refused(conn, conn.head, self.writer.too_large())
        if step in (SCREEN, QUEUED):
            return step
        if conn.peer_done:
            self.loop.close(conn)
        elif step == BODY:
            if conn.head is not None and conn.head.expect_continue:
                send_quietly(conn, CONTINUE)
            self.loop.enter(conn, BODY)
        else:
            self.loop.enter(conn, HEAD if conn.buffer else IDLE)
        return None

    def _may_linger(self) -> bool:
        """A lingering worker keeps an idle connection out of reach: not while a request waits for a
        worker, nor at the connection bound, where a newcomer may need that connection's place."""
        return not (self.workers.waiting or self.acceptor.crowded())

    def _environ(self, conn: Connection, head: Head) -> dict[str, Any]:
        path, _, query = head.target.partition("?")
        if path.startswith(("http://", "https://")):  # absolute-form: what a proxy sends
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        content_type = content_length = ""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": head.method, "SCRIPT_NAME": "", "PATH_INFO": _unquote(path),
            "QUERY_STRING": query, "RAW_URI": head.target, "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port), "SERVER_PROTOCOL": "HTTP/" + head.version,
            "REMOTE_ADDR": str(conn.address[0]) if conn.address else "", "wsgi.version": (1, 0),
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

    # -- the disconnect watch: asked for on the worker, kept by the loop ---------------------------------

    def _watch(self, conn: Connection, callback: Callable[[], None]) -> None:
        """environ["mcpserver.on_disconnect"]: the first callback starts the loop's watch on the socket."""
        with conn.lock:
            if not conn.gone:
                conn.callbacks.append(callback)
                if len(conn.callbacks) == 1 and conn.state == WORKING:
                    self.poller.arm(conn.fd, 0 if conn.probed else RDHUP)
                return
        callback()

    def watched(self, conn: Connection, events: int) -> None:
        """On the loop: an event on the socket of a request in progress."""
        if events & HUNG_UP:
            self.loop.hung_up(conn)
            return
        if not events & RDHUP:
            return
        # A FIN: the client sends no more, yet may still read. An interim 100 (RFC 9110 §15.2, skipped by
        # every client) is something a peer that is really gone answers with an RST: the watch sees that.
        with conn.lock:
            if conn.state != WORKING:
                return
            conn.probed = conn.peer_done = True
            if conn.callbacks and not conn.started and conn.head is not None and conn.head.version == "1.1":
                send_quietly(conn, CONTINUE)
            self.poller.arm(conn.fd, 0)

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
