"""Sender: writes to a database that must never hold up the caller (the bus's changes, a legacy session's events) go
through a bounded queue to one thread per process, which writes them in batches.

Rules of this module:
- `put` never waits: past `max_queued` items the new one is dropped, and that is logged.
- A batch the database refuses is lost to it (logged), and the thread waits RETRY_SECONDS before the next: what
  it writes is also held where it was made, so only other processes miss it.
- The thread starts in the process that puts first, and again in a fork's child (with a queue of its own: the
  parent's copy may hold a lock its thread took), so a store opened before a fork (gunicorn --preload) serves every
  worker.
- `flush` waits until everything put before it was written or refused: for tests, and for a caller that must
  read back what it wrote through another connection.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from .. import _log
from .._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

__all__ = ["MAX_BATCH", "MAX_QUEUED", "RETRY_SECONDS", "Sender"]

log = _log.get("mcpserver.tasks")

MAX_QUEUED = 10_000  # items waiting for the thread
MAX_BATCH = 500  # items written at once
RETRY_SECONDS = 1.0  # after the database refused, before trying again


class Sender:
    """`send(batch)` called on a thread of its own with what `put` queued, oldest first."""

    def __init__(self, name: str, what: str, send: Callable[[list[Any]], None], closed: threading.Event,
                 max_queued: int = MAX_QUEUED, every: Optional[tuple[float, Callable[[], list[Any]]]] = None):
        """`every`: (seconds, what to write that often besides what is put), written by the same thread."""
        self.name = name  # the thread's
        self._every = every
        self._next_tick = 0.0
        self.what = what  # for the log: "the notification bus"
        self._send = send
        self._closed = closed  # set: the thread ends (what is still queued is not written)
        self._max_queued = max_queued
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._pid = 0  # the process whose thread runs (0: none yet)
        self._queue: queue.Queue[Any] = queue.Queue(max_queued)

    def put(self, item: Any) -> None:
        self._start()
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            log.warning("%s is behind by %d writes: one is dropped", self.what, self._max_queued)

    def flush(self, timeout: float = 10.0) -> bool:
        """Waits until what was put before is written (or refused); whether that happened within `timeout`."""
        self._start()
        written = threading.Event()
        try:
            self._queue.put(written, timeout=timeout)
        except queue.Full:
            return False
        return written.wait(timeout)

    def _start(self) -> None:
        pid = os.getpid()
        if self._pid == pid:
            return
        with self._lock:
            if self._pid == pid:
                return
            self._queue = queue.Queue(self._max_queued)
            self._pid = pid
            threading.Thread(target=self._forever, name=self.name, daemon=True).start()

    def _forever(self) -> None:
        while not self._closed.is_set():
            ticked = self._ticked()
            try:
                item = self._queue.get(timeout=RETRY_SECONDS)
            except queue.Empty:
                if not ticked:
                    continue
                item = ticked.pop()
            batch: list[Any] = ticked
            flushed: list[threading.Event] = []
            while True:
                (flushed if isinstance(item, threading.Event) else batch).append(item)
                if len(batch) >= MAX_BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self._send(batch)
                except Exception as error:  # the database is down: other processes miss these
                    log.warning("%s could not write %d changes: %s", self.what, len(batch), error)
                    self._closed.wait(RETRY_SECONDS)
            for written in flushed:
                written.set()

    def _ticked(self) -> list[Any]:
        """What `every` asks to write now, once its seconds have passed since the last time."""
        if self._every is None or time.monotonic() < self._next_tick:
            return []
        seconds, items = self._every
        self._next_tick = time.monotonic() + seconds
        return items()
