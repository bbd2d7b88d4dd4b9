"""Progress while the matrix runs: one live line per cell on a terminal, timestamped lines otherwise.

Live mode redraws a block of lines in place (ANSI cursor-up), at most a few times a second; plain mode
(not a terminal, or CI set) prints a line only when a cell changes phase, so CI logs stay readable.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

REFRESH = 0.5  # seconds between redraws of the live block


def wants_live(stream: TextIO, env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ) if env is None else env
    return stream.isatty() and not env.get("CI") and env.get("TERM", "") != "dumb"


class Progress:
    def __init__(self, names: Sequence[str], stream: TextIO = sys.stderr, *, live: bool | None = None) -> None:
        self.stream = stream
        self.live = wants_live(stream) if live is None else live
        self._names = list(names)
        self._width = max((len(n) for n in names), default=10)
        self._phase = {n: "queued" for n in names}
        self._started: dict[str, float] = {}
        self._ended: dict[str, float] = {}
        self._lock = threading.Lock()
        self._drawn = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.live:
            self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
            self._draw()

    def say(self, message: str) -> None:
        """A line about the run as a whole (not about one cell)."""
        with self._lock:
            if self.live and self._drawn:
                self.stream.write(f"\x1b[{self._drawn}F\x1b[J")
                self._drawn = 0
            self.stream.write(f"{_stamp()} {message}\n")
            self.stream.flush()

    def update(self, name: str, phase: str, *, done: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            self._started.setdefault(name, now)
            if done:
                self._ended[name] = now
            self._phase[name] = phase
            if not self.live:
                elapsed = now - self._started[name]
                self.stream.write(f"{_stamp()} {name:<{self._width}}  {phase}  ({elapsed:.0f}s)\n")
                self.stream.flush()

    def _line(self, name: str, now: float) -> str:
        started = self._started.get(name)
        elapsed = (self._ended.get(name, now) - started) if started is not None else 0.0
        clock = f"{elapsed:5.0f}s" if started is not None else "     -"
        return f"  {name:<{self._width}}  {clock}  {self._phase[name]}"

    def _draw(self) -> None:
        with self._lock:
            now = time.monotonic()
            lines = [self._line(n, now) for n in self._names]
            up = f"\x1b[{self._drawn}F" if self._drawn else ""
            self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines))
            self.stream.flush()
            self._drawn = len(lines)

    def _loop(self) -> None:
        while not self._stop.wait(REFRESH):
            self._draw()


def _stamp() -> str:
    return time.strftime("%H:%M:%S")
