"""One measurement of one system: each function returns plain numbers or raises WrongAnswer/Timeout.

The clock covers only the exchange itself; every answer is parsed and checked after the clock stops.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from typing import Any, Optional

import clients
import systems
from clients import LineReader, WrongAnswer

STDIO_TIMEOUT = 120.0


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---------------------------------------------------------------------------------------------
# stdio: fresh processes


def cold_start(system: systems.System, log_dir: str) -> float:
    """Milliseconds from spawning the server to the first tools/call answer (stdin stays open)."""
    line = clients.echo_line(1)
    started = time.perf_counter()
    running = systems.start(system, log_dir)
    try:
        assert running.process.stdin is not None and running.process.stdout is not None
        _write_all(running.process.stdin.fileno(), line)
        raw = LineReader(running.process.stdout.fileno()).line(STDIO_TIMEOUT)
        elapsed = time.perf_counter() - started
    finally:
        systems.stop(running)
    clients.check_echo(raw, 1)
    return elapsed * 1000


def echo_pipe(system: systems.System, log_dir: str) -> float:
    """`echo REQUEST | server`: stdin ends right after the request. Milliseconds until the server exits
    with the answer written; WrongAnswer when it exits without one."""
    line = clients.echo_line(1)
    os.makedirs(log_dir, exist_ok=True)
    started = time.perf_counter()
    with open(os.path.join(log_dir, f"stdio-{system.key}.log"), "ab") as log:
        try:
            done = subprocess.run(system.argv, input=line, stdout=subprocess.PIPE, stderr=log, cwd=systems.ROOT,
                                  env=systems.environment(), timeout=STDIO_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise clients.Timeout(f"still running {STDIO_TIMEOUT:.0f} s after stdin closed") from None
    elapsed = time.perf_counter() - started
    if not done.stdout.strip():
        raise WrongAnswer(f"exited ({done.returncode}) without answering")
    clients.check_echo(done.stdout.splitlines()[0], 1)
    return elapsed * 1000


# ---------------------------------------------------------------------------------------------
# stdio: one long-lived process per system per round


class StdioSession:
    def __init__(self, running: systems.Running):
        self.running = running
        assert running.process.stdin is not None and running.process.stdout is not None
        self.stdin = running.process.stdin.fileno()
        self.reader = LineReader(running.process.stdout.fileno())
        self.next_id = 1

    def ids(self, count: int) -> range:
        first = self.next_id
        self.next_id += count
        return range(first, first + count)

    def ask(self, line: bytes) -> bytes:
        _write_all(self.stdin, line)
        return self.reader.line(STDIO_TIMEOUT)


def warm_up(session: StdioSession, count: int = 50) -> None:
    for request_id in session.ids(count):
        clients.check_echo(session.ask(clients.echo_line(request_id)), request_id)


def _check_batch(lines: list[bytes], ids: range) -> None:
    """Every id answered exactly once, correctly, in whatever order the server chose."""
    by_id: dict[Any, bytes] = {}
    for raw in lines:
        try:
            request_id = json.loads(raw).get("id")
        except (ValueError, AttributeError):
            raise WrongAnswer(f"not a JSON object: {raw[:120]!r}") from None
        if request_id in by_id:
            raise WrongAnswer(f"id {request_id} answered twice")
        by_id[request_id] = raw
    for request_id in ids:
        if request_id not in by_id:
            raise WrongAnswer(f"id {request_id} was not answered")
        clients.check_echo(by_id[request_id], request_id)


def stdio_pipelined(session: StdioSession, count: int) -> dict[str, float]:
    """`count` echo requests written ahead by a writer thread; requests per second until the last answer."""
    ids = session.ids(count)
    data = b"".join(clients.echo_line(i) for i in ids)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            _write_all(session.stdin, data)
        except OSError as exc:
            failure.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    started = time.perf_counter()
    writer.start()
    lines = session.reader.lines(count, STDIO_TIMEOUT)
    elapsed = time.perf_counter() - started
    writer.join()
    if failure:
        raise WrongAnswer(f"writing requests failed: {failure[0]}")
    _check_batch(lines, ids)
    return {"rps": count / elapsed}


def stdio_lockstep(session: StdioSession, count: int) -> dict[str, float]:
    """One request at a time; round-trip percentiles in microseconds."""
    ids = session.ids(count)
    lines = [clients.echo_line(i) for i in ids]
    times = []
    answers = []
    for line in lines:
        started = time.perf_counter()
        answers.append(session.ask(line))
        times.append(time.perf_counter() - started)
    for raw, request_id in zip(answers, ids):
        clients.check_echo(raw, request_id)
    return {"p50_us": percentile(times, 0.50) * 1e6, "p99_us": percentile(times, 0.99) * 1e6}


def _payload_request(kind: str, request_id: int, text: str) -> dict[str, Any]:
    if kind == "result":
        return clients.call(request_id, "big", size=clients.PAYLOAD_CHARS)
    return clients.call(request_id, "echo", text=text)


def stdio_payload(session: StdioSession, kind: str, repeats: int) -> dict[str, float]:
    """A 500,000-character result ("result") or argument echoed back ("argument"): milliseconds per
    round trip (median of `repeats`), and the bytes each way."""
    text = clients.payload_text() if kind == "argument" else "x" * clients.PAYLOAD_CHARS
    digest = clients.sha256(text)
    times, sizes = [], (0, 0)
    for request_id in session.ids(repeats):
        line = clients.encode(_payload_request(kind, request_id, text)) + b"\n"
        started = time.perf_counter()
        raw = session.ask(line)
        times.append(time.perf_counter() - started)
        clients.check_text(raw, request_id, clients.PAYLOAD_CHARS, digest)
        sizes = (len(line), len(raw))
    return {"ms": percentile(times, 0.5) * 1000, "request_bytes": sizes[0], "response_bytes": sizes[1]}


# ---------------------------------------------------------------------------------------------
# HTTP


def http_sequential(running: systems.Running, count: int) -> dict[str, float]:
    """`count` echo requests one after another on one keep-alive connection (a new one whenever the
    server closes it): requests per second and round-trip percentiles in microseconds."""
    client = clients.HttpClient("127.0.0.1", running.port)
    try:
        for request_id in range(1, 21):  # warm-up
            _check_http_echo(client, client.send(_http_echo(client, request_id)), request_id)
        client.connections = 0
        requests = [_http_echo(client, request_id) for request_id in range(100, 100 + count)]
        times, answers = [], []
        started = time.perf_counter()
        for request in requests:
            begun = time.perf_counter()
            answers.append(client.send(request))
            times.append(time.perf_counter() - begun)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    for request_id, response in enumerate(answers, start=100):
        _check_http_echo(client, response, request_id)
    return {"rps": count / elapsed, "p50_us": percentile(times, 0.5) * 1e6, "p99_us": percentile(times, 0.99) * 1e6,
            "connections": client.connections}


def _http_echo(client: clients.HttpClient, request_id: int) -> bytes:
    return client.request_bytes(clients.echo_line(request_id)[:-1], name="echo")


def _check_http_echo(client: clients.HttpClient, response: clients.HttpResponse, request_id: int) -> None:
    if response.status != 200:
        raise WrongAnswer(f"HTTP {response.status}: {response.body[:200]!r}")
    clients.check_echo(response.body, request_id)


def http_payload(running: systems.Running, kind: str, repeats: int) -> dict[str, float]:
    text = clients.payload_text() if kind == "argument" else "x" * clients.PAYLOAD_CHARS
    digest = clients.sha256(text)
    client = clients.HttpClient("127.0.0.1", running.port)
    times, sizes = [], (0, 0, 0)
    try:
        for request_id in range(1, repeats + 1):
            name = "big" if kind == "result" else "echo"
            request = client.request_bytes(clients.encode(_payload_request(kind, request_id, text)), name=name)
            started = time.perf_counter()
            response = client.send(request)
            times.append(time.perf_counter() - started)
            if response.status != 200:
                raise WrongAnswer(f"HTTP {response.status}: {response.body[:200]!r}")
            clients.check_text(response.body, request_id, clients.PAYLOAD_CHARS, digest)
            sizes = (len(request), response.wire_bytes, len(response.body))
    finally:
        client.close()
    return {"ms": percentile(times, 0.5) * 1000, "request_bytes": sizes[0], "response_bytes": sizes[1],
            "body_bytes": sizes[2]}


WRK_SCRIPT = os.path.join(systems.BENCH, "wrk.lua")


def http_wrk(running: systems.Running, seconds: float, connections: int, threads: int) -> dict[str, float]:
    """wrk with `connections` connections for `seconds`; every answer is checked by wrk.lua."""
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s", "-s", WRK_SCRIPT,
            f"http://127.0.0.1:{running.port}/mcp"]
    cpu_before, machine_before = systems.cpu_seconds(running.process.pid), systems.machine_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    cpu_used = systems.cpu_seconds(running.process.pid) - cpu_before
    busy, idle = (after - before for after, before in zip(systems.machine_cpu(), machine_before))
    wall = (busy + idle) / (os.cpu_count() or 1)  # seconds that passed, as the kernel counted them
    summary: Optional[dict[str, Any]] = None
    for line in done.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            summary = json.loads(line[len("WRK_JSON "):])
    if done.returncode != 0 or summary is None:
        raise WrongAnswer(f"wrk failed ({done.returncode}): {(done.stderr or done.stdout)[-400:]}")
    errors = {key: summary[key] for key in ("bad", "connect_errors", "read_errors", "write_errors", "status_errors",
                                            "timeouts") if summary[key]}
    if summary["bad"] or summary["timeouts"] or summary["status_errors"]:
        raise WrongAnswer(f"{summary['good']} good answers, then {errors}; first bad: {summary.get('sample')!r}")
    if not summary["good"]:
        raise WrongAnswer("no answers")
    return {"rps": summary["good"] / (summary["duration_us"] / 1e6), "p50_us": summary["p50_us"],
            "p99_us": summary["p99_us"], "socket_errors": sum(errors.values()),
            "cpu_us": cpu_used / summary["good"] * 1e6, "server_cores": cpu_used / wall, "idle_cores": idle / wall}
