"""What the app learns of the WSGI server it runs under: that it was told to stop.

The built-in server calls the app's shutdown() when it stops, and its open streams end with their graceful result.
A WSGI server has no such call. gunicorn's worker, sent SIGTERM, stops accepting and waits for the requests in
flight for its graceful timeout (30 s), then is killed: a subscriptions/listen stream is a request in flight that
never ends by itself, so a worker holding one (its client gone or not) waited the whole timeout, and the streams
it held were cut instead of ended (tests/http/test_stop_with_listeners.py: 30.1 s for the gthread and the sync
worker). So while streams are open under such a server, one thread looks every POLL_SECONDS whether the server
was told to stop, and then calls the app's shutdown(): the streams end as the revision says, the requests in flight
finish, and the worker exits well within its timeout.

How a server says so: gunicorn handles SIGTERM in its worker with a method of the worker (handle_exit) that clears
the worker's `alive` flag, whatever the worker class; a server whose signal handler is not such a method is not
watched (its streams end when it closes their connections, or at --max-listen-seconds).

gunicorn's master, on an interpreter without C's SimpleQueue (PyPy): since gunicorn 25 its signal handlers put
into a queue.SimpleQueue that its main loop gets from. CPython's is C and safe there; PyPy's is queue's own Python,
a Semaphore over a Lock that is not reentrant, so a signal (a worker's SIGCHLD, most often during a stop) that lands
while the main loop holds that Lock runs a handler that waits for it for ever: the master hangs, and its workers,
stopped, are never replaced (seen as a master that outlived SIGTERM by minutes in the lab's PyPy cells;
tests/http/test_gunicorn_master.py). mend_master() gives the master a queue a handler can always put into: itself
when the app is loaded in the master (--preload), or gunicorn's on_starting hook in mcpserver.http.gunicorn_conf.
"""

from __future__ import annotations

import collections
import os
import queue
import select
import signal
import sys
import threading
import time

from .._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

__all__ = ["HostWatch", "SignalQueue", "host_stopping", "mend_master"]

POLL_SECONDS = 0.25


def host_stopping() -> bool:
    """Whether the server hosting this process was told to stop (see the module: gunicorn's worker, after SIGTERM)."""
    worker = _gunicorn_worker()
    return worker is not None and worker.alive is False


def _gunicorn_worker() -> Any:
    """The gunicorn worker this process is (its SIGTERM handler is the worker's method), or None."""
    base = sys.modules.get("gunicorn.workers.base")
    worker = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return worker if base is not None and isinstance(worker, base.Worker) else None


class HostWatch:
    """One thread per process while streams are open under a WSGI server: it calls `stop` once the server was told
    to stop."""

    def __init__(self, stop: Callable[[], None]):
        self._stop = stop
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._open = 0
        self._watching_pid = 0  # the process whose thread watches (0: none): a forked worker starts its own

    def opened(self) -> Callable[[], None]:
        """A stream opened; the callable that says it closed."""
        with self._lock:
            self._open += 1
            if self._watching_pid != os.getpid():
                self._watching_pid = os.getpid()
                threading.Thread(target=self._watch, name="mcpserver-host-watch", daemon=True).start()
        closed: list[bool] = []

        def close() -> None:
            with self._lock:
                if not closed:
                    closed.append(True)
                    self._open -= 1

        return close

    def _watch(self) -> None:
        stopping: Optional[bool] = None
        while not stopping:
            time.sleep(POLL_SECONDS)
            with self._lock:
                if self._open <= 0:  # nothing left to end: the next stream starts a thread again
                    self._watching_pid = 0
                    return
            stopping = host_stopping()
        self._stop()


class SignalQueue:
    """What gunicorn's master uses of queue.SimpleQueue, safe to put into from a signal handler that interrupted a
    get(): a deque (whose append and popleft need no lock) and a pipe that wakes a get() waiting for an item."""

    def __init__(self, items: Any = ()) -> None:
        self._items: collections.deque[Any] = collections.deque(items)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def put(self, item: Any, block: bool = True, timeout: Optional[float] = None) -> None:
        self._items.append(item)
        try:
            os.write(self._wake_write, b"\0")
        except BlockingIOError:  # the pipe is full of wakes already: a getter will look
            pass

    def put_nowait(self, item: Any) -> None:
        self.put(item)

    def get(self, block: bool = True, timeout: Optional[float] = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._items:  # an item put before its wake: taken now, its wake read by a later get
                return self._items.popleft()
            left = None if deadline is None else deadline - time.monotonic()
            if not block or (left is not None and left <= 0):
                raise queue.Empty
            select.select([self._wake_read], [], [], left)
            try:
                os.read(self._wake_read, 4096)
            except BlockingIOError:
                pass

    def get_nowait(self) -> Any:
        return self.get(block=False)

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items


def mend_master(arbiter: Any = None) -> bool:
    """Give gunicorn's master (`arbiter`, or the one whose construction loads this app: --preload) a SignalQueue
    where its SimpleQueue is Python's own (see the module); True when it was mended."""
    pure = getattr(queue, "_PySimpleQueue", None)
    if arbiter is None:
        arbiter = _arbiter_loading_us()
    held: Any = getattr(arbiter, "SIG_QUEUE", None)
    if pure is None or type(held) is not pure:
        return False
    items = []
    while not held.empty():
        items.append(held.get_nowait())
    arbiter.SIG_QUEUE = SignalQueue(items)
    return True


def _arbiter_loading_us() -> Any:
    """The gunicorn Arbiter on this thread's stack (it loads the app in its constructor with --preload), or None."""
    if "gunicorn.arbiter" not in sys.modules or _gunicorn_worker() is not None:
        return None  # a worker's stack holds its copy of the master too (it was forked there): not the master
    frame: Any = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, sys.modules["gunicorn.arbiter"].Arbiter):
            return candidate
        frame = frame.f_back
    return None
