"""Profile mcpserver's hot paths in-process with cProfile, and time them against the ceilings' own code.

Two paths, each fed a batch of tools/call echo requests written ahead:
- stdio: mcpserver.stdio.serve_stdio over in-memory streams, against the bare loop's serve().
- HTTP: one keep-alive connection served by mcpserver's own HTTP/1.1 server (mcpserver.httpd), its
  requests written ahead into an in-memory stand-in for the socket and served as one of its workers
  serves pipelined requests (screen, app, response, next request), against the bare
  ThreadingHTTPServer's handler. The stand-in lends a real file descriptor (one end of a socketpair),
  registered with the server's epoll, to what needs one: each call's disconnect watch arms it.
Without the profiler, the microseconds per request are the CPU cost each server pays in Python,
free of the scheduling noise that end-to-end figures carry. With it, the top functions by own time
show where that cost goes.

    PYTHONPATH=server python bench/profile_hot_path.py
"""

from __future__ import annotations

import cProfile
import io
import logging
import os
import pstats
import socket
import sys
import threading
import time
from typing import Any, Callable

import ceiling_http
import ceiling_stdio
import clients

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "server"))

from mcpserver import http as mcp_http  # noqa: E402
from mcpserver import stdio as mcp_stdio  # noqa: E402
from mcpserver._loader import load_target  # noqa: E402
from mcpserver.httpd import ServeOptions  # noqa: E402
from mcpserver.httpd import _serve as _httpd  # noqa: E402
from mcpserver.httpd._connection import Connection  # noqa: E402
from mcpserver.httpd._machine import Machine  # noqa: E402

STDIO_REQUESTS = 20_000
HTTP_REQUESTS = 5_000
REPEATS = 5
TOP = 12


def _stdio_input(count: int) -> bytes:
    return b"".join(clients.echo_line(i) for i in range(1, count + 1))


def stdio_ours(data: bytes) -> Callable[[], bytes]:
    server = load_target(os.path.join(ROOT, "server", "examples", "demo.py"))

    def run() -> bytes:
        out = io.BytesIO()
        mcp_stdio.serve_stdio(server, io.BytesIO(data), out)
        return out.getvalue()

    return run


def stdio_bare(data: bytes) -> Callable[[], bytes]:
    def run() -> bytes:
        out = io.BytesIO()
        ceiling_stdio.serve(io.BytesIO(data), out)
        return out.getvalue()

    return run


def _http_requests(count: int) -> bytes:
    client = clients.HttpClient("127.0.0.1", 1)
    return b"".join(client.request_bytes(clients.echo_line(i)[:-1], name="echo") for i in range(1, count + 1))


class _Connection:
    """A socket stand-in for one connection: the requests to read, and whatever the handler sends."""

    def __init__(self, requests: bytes, fd: int = -1):
        self._requests = io.BytesIO(requests)
        self.sent: list[bytes] = []
        self._fd = fd

    def makefile(self, mode: str, buffering: int = -1) -> io.BytesIO:
        return self._requests

    def recv(self, size: int, flags: int = 0) -> bytes:
        return self._requests.read(size)

    def send(self, data: Any) -> int:
        self.sent.append(bytes(data))
        return len(data)

    def setblocking(self, flag: bool) -> None:
        pass

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def setsockopt(self, *args: Any) -> None:
        pass

    def settimeout(self, timeout: Any) -> None:
        pass

    def gettimeout(self) -> None:
        return None


def _one_connection(handle: Callable[[Any], Any], requests: bytes, fd: int = -1) -> bytes:
    """Serve one keep-alive connection whose requests were all written ahead, without a real socket:
    only the Python work of parsing, answering and formatting is measured."""
    connection = _Connection(requests, fd)
    handle(connection)
    return b"".join(connection.sent)


def http_ours(requests: bytes) -> Callable[[], bytes]:
    app = mcp_http.create_app(os.path.join(ROOT, "server", "examples", "demo.py"), token=None)
    httpd = _httpd._Server(app, ServeOptions(host="127.0.0.1", port=0, max_connections=4))
    httpd.door.listener.close()  # nothing connects: the connection below is handed over directly
    lender = socket.socketpair()  # kept open as long as the closure: its fd stands for the connection's
    httpd.loop.poller.add(lender[0].fileno(), 0)

    def serve(sock: Any) -> None:
        machine = Machine(httpd.loop.rules, False, time.monotonic())
        connection = Connection(sock, ("127.0.0.1", 0), None, machine)
        machine.received(requests, False, time.monotonic())  # all of them already read, as pipelined requests are
        connection.busy = True  # the loop handed it to a worker
        httpd.worker.work(connection)

    def run() -> bytes:
        return _one_connection(serve, b"", lender[0].fileno())

    return run


def http_bare(requests: bytes) -> Callable[[], bytes]:
    httpd = ceiling_http.Server(("127.0.0.1", 0), ceiling_http.Handler)

    def run() -> bytes:
        return _one_connection(lambda sock: ceiling_http.Handler(sock, ("127.0.0.1", 0), httpd), requests)

    return run


def _check(output: bytes, count: int, marker: bytes) -> None:
    found = output.count(marker)
    if found != count:
        raise clients.WrongAnswer(f"{found} answers to {count} requests")


def _per_request_us(run: Callable[[], bytes], count: int, marker: bytes) -> float:
    started = time.perf_counter()
    output = run()
    elapsed = time.perf_counter() - started
    _check(output, count, marker)
    return elapsed / count * 1e6


# Where a thread waits rather than works: not cost, so never listed (stdio's main thread only waits).
_BLOCKING = ("<method 'acquire' of '_thread.lock' objects>", "<method 'acquire' of '_thread.RLock' objects>",
             "<built-in method time.sleep>", "<method 'poll' of 'select.epoll' objects>")


def _profiled(run: Callable[[], bytes]) -> tuple[bytes, pstats.Stats]:
    """Run under cProfile in this thread and in every thread it starts that ends by the time it returns
    (the stdio server reads and answers on threads of its own; cProfile alone sees only this one)."""
    finished: list[cProfile.Profile] = []
    original = threading.Thread.run

    def run_profiled(thread: threading.Thread) -> None:
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            original(thread)
        finally:
            profiler.disable()
            finished.append(profiler)

    main = cProfile.Profile()
    threading.Thread.run = run_profiled  # type: ignore[method-assign,assignment]
    try:
        main.enable()
        output = run()
        main.disable()
    finally:
        threading.Thread.run = original  # type: ignore[method-assign]
    stats = pstats.Stats(main)
    for profiler in list(finished):
        stats.add(profiler)
    return output, stats


def _top(stats: pstats.Stats, count: int) -> list[dict[str, Any]]:
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, function), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~" and function in _BLOCKING:
            continue
        rows.append({"function": _label(filename, line, function), "calls_per_request": ncalls / count,
                     "own_us": tottime / count * 1e6, "cumulative_us": cumtime / count * 1e6,
                     "share": tottime / total if total else 0.0})
    rows.sort(key=lambda row: -row["own_us"])
    return rows[:TOP]


def _label(filename: str, line: int, function: str) -> str:
    if filename == "~":
        return function
    if filename.startswith(ROOT):
        filename = os.path.relpath(filename, ROOT)
    elif "/lib/python" in filename:
        filename = "stdlib/" + filename.split("/lib/python", 1)[1].split("/", 1)[1]
    return f"{filename}:{line}({function})"


def profile_all() -> dict[str, Any]:
    logging.getLogger("mcpserver").setLevel(logging.WARNING)
    stdio_data = _stdio_input(STDIO_REQUESTS)
    http_data = _http_requests(HTTP_REQUESTS)
    paths = {
        "stdio": (STDIO_REQUESTS, b"\n", stdio_ours(stdio_data), stdio_bare(stdio_data)),
        "http": (HTTP_REQUESTS, b"HTTP/1.", http_ours(http_data), http_bare(http_data)),
    }
    results: dict[str, Any] = {}
    for name, (count, marker, ours, bare) in paths.items():
        timings: dict[str, list[float]] = {"mcpserver": [], "bare": []}
        for _ in range(REPEATS):  # interleaved, like everything else
            timings["mcpserver"].append(_per_request_us(ours, count, marker))
            timings["bare"].append(_per_request_us(bare, count, marker))
        output, stats = _profiled(ours)
        _check(output, count, marker)
        results[name] = {"requests": count, "us_per_request": timings, "top": _top(stats, count)}
    return results


def main() -> None:
    results = profile_all()
    for name, result in results.items():
        ours, bare = min(result["us_per_request"]["mcpserver"]), min(result["us_per_request"]["bare"])
        print(f"{name}: mcpserver {ours:.1f} us/request, bare {bare:.1f} us/request ({ours / bare:.2f}x)")
        for row in result["top"]:
            print(f"  {row['own_us']:7.2f} us own {row['cumulative_us']:8.2f} us cum {row['calls_per_request']:6.2f} "
                  f"calls  {row['function']}")


if __name__ == "__main__":
    main()
