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
- `--log-format json` makes each record one JSON object on one line: time (UTC, ISO 8601), level, logger,
  message (and the traceback as `exception`), and for a record made while a request is answered (in_request,
  a middleware) its request_id, the principal (an OAuth subject or client) and, when the request is traced,
  its trace_id. json and contextvars are imported only then.
"""

from __future__ import annotations

import sys
import threading
import time

from ._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, TextIO

__all__ = ["FORMATS", "LEVELS", "LOG_FORMAT", "Logger", "adopt_logging", "configure", "get", "in_request"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}
FORMATS = ("text", "json")
_NAMES = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR"}


class _Settings:
    direct = False  # the command line owns the log: write records here, without the logging module
    level = 20
    stream: Optional[TextIO] = None  # None: sys.stderr, looked up at each write (tests replace it)
    lock = threading.Lock()
    json: Any = None  # the json module when records are JSON lines
    request: Any = None  # with JSON: a ContextVar holding the Call being answered in this context


renew_at_fork(_Settings, "lock")  # a child forked while a thread wrote a record logs too


def configure(level: str, log_file: Optional[str], log_format: str = "text") -> None:
    """The command line's log: its level, a file to append to (else stderr), and its format (FORMATS). OSError if
    the file cannot open."""
    _Settings.level = LEVELS[level]
    _Settings.stream = open(log_file, "a", encoding="utf-8") if log_file else None  # noqa: SIM115  open for the process
    if log_format == "json":
        import contextvars
        import json

        _Settings.json = json
        _Settings.request = contextvars.ContextVar("mcpserver.request", default=None)
    _Settings.direct = True


def in_request(call: Any, proceed: Callable[[], Any]) -> Any:
    """A middleware: records made while the request is answered carry its request id, principal and trace id."""
    if _Settings.request is None:
        return proceed()
    token = _Settings.request.set(call)
    try:
        return proceed()
    finally:
        _Settings.request.reset(token)


def _json_line(created: float, level: str, name: str, message: str, exception: Optional[str]) -> str:
    fields: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z",
        "level": level, "logger": name, "message": message}
    if exception:
        fields["exception"] = exception
    call = _Settings.request.get() if _Settings.request is not None else None
    if call is not None:
        fields["request_id"] = call.request_id
        principal = call.principal
        if principal is not None:
            fields["principal"] = principal.subject or principal.client_id
        trace_id = _trace_id()
        if trace_id:
            fields["trace_id"] = trace_id
    return str(_Settings.json.dumps(fields, default=str))


def _trace_id() -> str:
    """The current span's trace id (OpenTelemetry, when the server's code uses it), else ""."""
    if "opentelemetry.trace" not in sys.modules:
        return ""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.trace_id else ""


def adopt_logging() -> None:
    """If `logging` is imported (the server's own code uses it), give it the command line's destination."""
    if not _Settings.direct or "logging" not in sys.modules:
        return
    import logging

    handler: logging.Handler = logging.StreamHandler(_Settings.stream or sys.stderr)
    handler.setFormatter(_json_formatter() if _Settings.json is not None else logging.Formatter(LOG_FORMAT))
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
        exception = None
        if exc_info and sys.exc_info()[0] is not None:
            import traceback

            exception = traceback.format_exc().rstrip("\n")
        if _Settings.json is not None:
            line = _json_line(now, _NAMES[level], self.name, text, exception)
        else:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"
            line = f"{stamp} {_NAMES[level]} {self.name}: {text}" + (f"\n{exception}" if exception else "")
        self._write(line + "\n")

    @staticmethod
    def _write(line: str) -> None:
        with _Settings.lock:
            stream = _Settings.stream or sys.stderr
            try:
                stream.write(line)
                stream.flush()
            except (OSError, ValueError):  # stderr closed: nowhere left to say it
                pass


def get(name: str) -> Logger:
    return Logger(name)


def _json_formatter() -> Any:
    """A logging.Formatter writing the same JSON lines (the server's code uses logging, adopted); its class is made
    here, once logging is imported."""
    import logging

    class JsonFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            exception = self.formatException(record.exc_info) if record.exc_info else None
            return _json_line(record.created, record.levelname, record.name, record.getMessage(), exception)

    return JsonFormatter()
