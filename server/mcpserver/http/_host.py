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
"""

from __future__ import annotations

import os
import signal
import threading
import time

from .._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

__all__ = ["HostWatch", "host_stopping"]

POLL_SECONDS = 0.25


def host_stopping() -> bool:
    """Whether the server hosting this process was told to stop (see the module: gunicorn's worker, after SIGTERM)."""
    worker = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return worker is not None and type(worker).__module__.startswith("gunicorn.") and worker.alive is False


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
