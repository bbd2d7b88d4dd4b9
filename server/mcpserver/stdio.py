"""The stdio transport: one JSON-RPC message per line in, one per line out (WIRE.md §15).

Rules of this module:
- stdout carries protocol lines only. The protocol writes to a private duplicate of fd 1, and fd 1
  itself is pointed at stderr, so a tool that prints (from Python, C or a child process) can only
  reach the log.
- Each line is answered before the next is read; every response is flushed at once.
- Blank lines are skipped, a trailing CR is dropped, a last line without a newline is still
  answered. A line longer than MAX_LINE_BYTES is discarded and answered with an error.
- EOF: everything read has been answered; exit 0. SIGTERM/SIGINT: finish the message in hand, then
  exit 0; while waiting for input, exit at once. A closed stdout ends the server quietly.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any, BinaryIO, Optional, Union

from . import protocol
from ._server import Server
from .errors import InvalidRequest

__all__ = ["MAX_LINE_BYTES", "serve_stdio"]

log = logging.getLogger("mcpserver.stdio")

MAX_LINE_BYTES = 64 * 1024 * 1024  # room for a 5 MB payload even when JSON escapes make it 6x longer


Writer = Union[BinaryIO, "_FdWriter"]


class _Stop(Exception):
    """Raised by the signal handler while the loop waits for input."""


class _LogWriter:
    """Stands in for sys.stdout while serving: what tools print goes to the log, line by line.

    A write without a newline (a progress bar's "\\r3/10") is only kept, so many of them cost linear
    time; a partial line longer than MAX_PARTIAL_LINE is logged as it is rather than held without end.
    """

    MAX_PARTIAL_LINE = 64 * 1024

    def __init__(self, logger: logging.Logger):
        self._logger = logger
        self._pending: list[str] = []
        self._pending_size = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            if "\n" not in text:
                self._pending.append(text)
                self._pending_size += len(text)
                if self._pending_size > self.MAX_PARTIAL_LINE:
                    self._emit("".join(self._pending))
            else:
                first, *middle, last = text.split("\n")
                self._emit("".join(self._pending) + first)
                for line in middle:
                    self._logger.info("%s", line)
                if last:
                    self._pending, self._pending_size = [last], len(last)
        return len(text)

    def _emit(self, line: str) -> None:
        self._pending, self._pending_size = [], 0
        self._logger.info("%s", line)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._emit("".join(self._pending))

    def isatty(self) -> bool:
        return False


class _FdWriter:
    """Unbuffered writes of whole messages to a file descriptor.

    Every message is flushed at once anyway, and a buffer left holding an unsent response when the
    reader has gone makes Python 3.13+ report an ignored BrokenPipeError at exit.
    """

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        return len(data)

    def flush(self) -> None:
        pass


def _protocol_stream() -> _FdWriter:
    """Take fd 1 for the protocol alone and point fd 1 (and sys.stdout) at the log."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = _LogWriter(logging.getLogger("mcpserver.tool.stdout"))
    return _FdWriter(protocol_fd)


def _protocol_input() -> BinaryIO:
    """Take fd 0 for the protocol alone and point fd 0 (and sys.stdin) at /dev/null.

    Otherwise a tool reading sys.stdin, or a child it starts without stdin=DEVNULL, reads the
    client's next requests, which are then lost.
    """
    protocol_fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, closefd=False, encoding="utf-8")  # noqa: SIM115  fd 0 lives as long as the process
    return os.fdopen(protocol_fd, "rb")


def serve_stdio(server: Server, stdin: Optional[BinaryIO] = None, stdout: Optional[Writer] = None) -> int:
    """Serve `server` on stdin/stdout until EOF or a signal; return the exit status (0).

    With the default streams the process's own fd 1 is taken over (see the module docstring);
    pass streams to serve anything else, as tests do.
    """
    reader = stdin if stdin is not None else _protocol_input()
    writer = stdout if stdout is not None else _protocol_stream()
    state = {"busy": False, "stop": False}

    def on_signal(signum: int, frame: Any) -> None:
        state["stop"] = True
        if not state["busy"]:
            raise _Stop()

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[signum] = signal.signal(signum, on_signal)
        except ValueError:  # not the main thread: the embedding application owns signals
            pass
    log.info("serving %s %s over stdio", server.name, server.version)
    try:
        while not state["stop"]:
            try:
                line = reader.readline(MAX_LINE_BYTES + 1)
            except _Stop:
                break
            if not line:
                break
            state["busy"] = True
            try:
                if not _answer(line, reader, writer, server):
                    break
            finally:
                state["busy"] = False
    except _Stop:
        pass
    finally:
        state["busy"] = True  # from here on a signal only sets the flag
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        try:
            writer.flush()
        except (BrokenPipeError, OSError):
            pass
    log.info("stdio closed; exiting")
    return 0


def _answer(line: bytes, reader: BinaryIO, writer: Writer, server: Server) -> bool:
    """Answer one line; False when stdout is gone and serving should end."""
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:  # discard the rest of the oversized line
            rest = reader.readline(MAX_LINE_BYTES)
            if not rest or rest.endswith(b"\n"):
                break
        error = InvalidRequest(f"Invalid Request: message longer than {MAX_LINE_BYTES} bytes")
        reply = protocol.Reply({"jsonrpc": "2.0", "error": error.to_error()}, error.http_status)
    else:
        line = line.rstrip(b"\n").rstrip(b"\r")
        if not line.strip():
            return True
        reply = protocol.dispatch_bytes(line, server)
    if reply.response is None:
        return True
    data = protocol.encode(reply.response)
    try:
        if len(data) < 65536:  # one write for the common case; no copy of a large one
            writer.write(data + b"\n")
        else:
            writer.write(data)
            writer.write(b"\n")
        writer.flush()
    except (BrokenPipeError, ValueError, OSError) as exc:
        log.info("stdout closed (%s); exiting", exc.__class__.__name__)
        return False
    return True
