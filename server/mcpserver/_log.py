"""Logging that imports `logging` only when something needs it.

Importing `logging` (with traceback, tokenize, string and weakref behind it) is a large part of what
a stdio server spends before its first answer, and a server that logs one line at start needs none
of it. So:
- Inside a library (mcpserver.run from your script, create_app under gunicorn), every record goes
  to the standard `logging` module, imported at the first record, so your configuration applies.
- Under `python -m mcpserver`, the command line owns the log (`direct`): records are formatted
  here, as LOG_FORMAT would, and written to stderr or the log file. If the server's own code has
  imported `logging` by the time it is loaded (`adopt_logging`), the root logger gets the same
  destination and format, and records go through it, so the two streams are one.
"""

from __future__ import annotations

import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, TextIO

__all__ = ["LEVELS", "LOG_FORMAT", "Logger", "adopt_logging", "configure", "get"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
_NAMES = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR"}


class _Settings:
    direct = False  # the command line owns the log: write records here, without the logging module
    level = 20
    stream: Optional[TextIO] = None  # None: sys.stderr, looked up at each write (tests replace it)
    lock = threading.Lock()


def configure(level: str, log_file: Optional[str]) -> None:
    """The command line's log: its level, and a file to append to (else stderr). OSError if it cannot open."""
    _Settings.level = LEVELS[level]
    _Settings.stream = open(log_file, "a", encoding="utf-8") if log_file else None  # noqa: SIM115  open for the process
    _Settings.direct = True


def adopt_logging() -> None:
    """If `logging` is imported (the server's own code uses it), give it the command line's destination."""
    if not _Settings.direct or "logging" not in sys.modules:
        return
    import logging

    handler: logging.Handler = logging.StreamHandler(_Settings.stream or sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_Settings.level)
    _Settings.direct = False


class Logger:
    """The few methods of logging.Logger the server uses."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def enabled(self, level: int) -> bool:
        """Whether a record at `level` would be written (always True when logging is configured: it decides)."""
        return not _Settings.direct or level >= _Settings.level

    def debug(self, message: str, *args: Any) -> None:
        self._log(10, message, args)

    def info(self, message: str, *args: Any) -> None:
        self._log(20, message, args)

    def warning(self, message: str, *args: Any) -> None:
        self._log(30, message, args)

    def error(self, message: str, *args: Any, exc_info: bool = False) -> None:
        self._log(40, message, args, exc_info)

    def exception(self, message: str, *args: Any) -> None:
        self._log(40, message, args, True)

    def _log(self, level: int, message: str, args: tuple[Any, ...], exc_info: bool = False) -> None:
        if not _Settings.direct:
            import logging

            logging.getLogger(self.name).log(level, message, *args, exc_info=exc_info)
            return
        if level < _Settings.level:
            return
        now = time.time()
        text = message % args if args else message
        if exc_info and sys.exc_info()[0] is not None:
            import traceback

            text += "\n" + traceback.format_exc().rstrip("\n")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"
        line = f"{stamp} {_NAMES[level]} {self.name}: {text}\n"
        with _Settings.lock:
            stream = _Settings.stream or sys.stderr
            try:
                stream.write(line)
                stream.flush()
            except (OSError, ValueError):  # stderr closed: nowhere left to say it
                pass


def get(name: str) -> Logger:
    return Logger(name)
