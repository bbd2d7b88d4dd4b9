"""Whether a run is stopping, and why: shared by the scheduler, every cell and every suite's reruns."""

from __future__ import annotations

import threading


class Stopping:
    """`stop`: start nothing new (--fail-fast lets running cells finish); `interrupted`: an interrupt, whose
    handler has killed every process, so what it cut short is cancelled. Setting them takes no lock that
    the interrupted code may hold: a signal handler calls `interrupt`."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.interrupted = threading.Event()
        self.reason = ""
        self._lock = threading.Lock()

    def request(self, reason: str) -> None:
        with self._lock:
            if not self.stop.is_set():
                self.reason = reason
                self.stop.set()

    def interrupt(self, reason: str) -> None:
        if not self.stop.is_set():
            self.reason = reason
        self.interrupted.set()
        self.stop.set()
