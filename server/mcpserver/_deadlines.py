"""Callbacks due at a time (a listen stream's end under --max-listen-seconds), run by one thread for all of them.

Rules of this module:
- One daemon thread per process, started when the first deadline is set: a bounded stream costs an entry in a
  heap, never a thread or a timer of its own, as an open stream costs no thread.
- `after(seconds, callback)` returns what cancels it. A cancelled entry is dropped when it comes due, or sooner
  when the cancelled outnumber the live ones, so streams opened and closed in a loop cost bounded memory.
- A callback runs on the deadline thread, outside the lock; one that raises is logged and the others still run.
- The clock is time.monotonic: a change of the wall clock moves no deadline.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time

from . import _log
from ._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

__all__ = ["after"]

log = _log.get("mcpserver.deadlines")

_COMPACT_AT = 64  # cancelled entries tolerated before the heap is rebuilt without them


class _Deadlines:
    def __init__(self) -> None:
        # (when, sequence, [callback, or None once cancelled or run]): the sequence keeps callbacks out of ordering
        self._due: list[tuple[float, int, list[Optional[Callable[[], None]]]]] = []
        self._cancelled = 0
        self._changed = threading.Condition()
        renew_at_fork(self, "_changed")
        self._sequence = itertools.count()
        self._thread: Optional[threading.Thread] = None
        self._pid = 0  # the process whose thread runs: a forked child starts its own

    def after(self, seconds: float, callback: Callable[[], None]) -> Callable[[], None]:
        box: list[Optional[Callable[[], None]]] = [callback]
        with self._changed:
            heapq.heappush(self._due, (time.monotonic() + seconds, next(self._sequence), box))
            if self._thread is None or self._pid != os.getpid():
                self._thread = threading.Thread(target=self._run, name="mcpserver-deadlines", daemon=True)
                self._pid = os.getpid()
                self._thread.start()
            self._changed.notify()

        def cancel() -> None:
            with self._changed:
                if box[0] is None:  # run already, or cancelled
                    return
                box[0] = None
                self._cancelled += 1
                if self._cancelled > _COMPACT_AT and self._cancelled * 2 > len(self._due):
                    self._due = [entry for entry in self._due if entry[2][0] is not None]
                    heapq.heapify(self._due)
                    self._cancelled = 0

        return cancel

    def __len__(self) -> int:
        """Entries held, cancelled ones not yet dropped included (what memory they cost)."""
        return len(self._due)

    def _run(self) -> None:
        while True:
            with self._changed:
                callback = self._next_locked()
            try:
                callback()
            except Exception:
                log.exception("a deadline's callback failed")

    def _next_locked(self) -> Callable[[], None]:
        """Wait for the earliest live deadline, and take its callback."""
        while True:
            if not self._due:
                self._changed.wait()
                continue
            when, _, box = self._due[0]
            callback = box[0]
            if callback is None:
                heapq.heappop(self._due)
                self._cancelled -= 1
                continue
            wait = when - time.monotonic()
            if wait > 0:
                self._changed.wait(wait)
                continue
            heapq.heappop(self._due)
            box[0] = None
            return callback


_DEADLINES = _Deadlines()
after = _DEADLINES.after
