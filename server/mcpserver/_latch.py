"""Latch: a flag set once, which a signal handler may set.

The transports' signal handlers run on the main thread, wherever it happens to be: inside threading.Event.wait,
holding the Event's lock, or inside another handler's Event.set. An Event.set() from the handler would then
wait for a lock its own thread holds, for ever (tests/unit/test_stdio.py and tests/http/test_http_server.py
send a signal at each line of those places in turn). Setting a Latch releases a lock, which never blocks.
"""

from __future__ import annotations

import threading


class Latch:
    """Set once, never cleared; waited on by one thread at most. set() takes no lock (see the module)."""

    __slots__ = ("_gate", "_set")

    def __init__(self) -> None:
        self._set = False
        self._gate = threading.Lock()  # held until set() opens it; release() never blocks
        self._gate.acquire()

    def set(self) -> None:
        if not self._set:
            self._set = True
            try:
                self._gate.release()
            except RuntimeError:  # two set() at once: the other one opened it
                pass

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        return self._set or self._gate.acquire(timeout=timeout) or self._set
