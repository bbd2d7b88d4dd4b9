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
from typing import Any, Callable, Optional

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


def cold_start(system: systems.System, log_dir: str) -> dict[str, float]:
    """Milliseconds from spawning the server to the first tools/call answer (stdin stays open), and the
    peak RSS (VmHWM, MiB) right after that answer: what a server costs once started."""
    line = clients.echo_line(1)
    started = time.perf_counter()
    running = systems.start(system, log_dir)
    try:
        assert running.process.stdin is not None and running.process.stdout is not None
        _write_all(running.process.stdin.fileno(), line)
        raw = LineReader(running.process.stdout.fileno()).line(STDIO_TIMEOUT)
        elapsed = time.perf_counter() - started
        peak_kib = systems.peak_rss_kib(running.process.pid)
    finally:
        systems.stop(running)
    clients.check_echo(raw, 1)
    if not peak_kib:
        raise RuntimeError("could not read the server's VmHWM from /proc")
    return {"ms": elapsed * 1000, "mib": peak_kib / 1024}


def import_times(python: str, log_dir: str) -> dict[str, Any]:
    """`python -X importtime -m mcpserver demo.py` up to its first answer: every import's own and
    cumulative microseconds by module, and the milliseconds to that answer (inflated by -X importtime
    itself, so only for scale)."""
    argv = [python, "-X", "importtime", "-m", "mcpserver", systems.DEMO]
    os.makedirs(log_dir, exist_ok=True)
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=systems.ROOT, env=systems.environment())
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        _write_all(process.stdin.fileno(), clients.echo_line(1))
        raw = LineReader(process.stdout.fileno()).line(STDIO_TIMEOUT)
        elapsed = time.perf_counter() - started
        process.kill()  # at once: what an orderly exit would import is not start-up
        _, stderr = process.communicate(timeout=STDIO_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    clients.check_echo(raw, 1)
    rows = []
    for text in stderr.decode(errors="replace").splitlines():
        if not text.startswith("import time:") or "imported package" in text:
            continue
        own_us, cumulative_us, name = text[len("import time:"):].split("|", 2)
        depth = (len(name) - len(name.lstrip())) // 2  # -X importtime indents each level by two spaces
        rows.append((name.strip(), int(own_us), int(cumulative_us), depth))
    if not rows:
        raise WrongAnswer("no -X importtime lines on stderr")
    # A module is listed when its import ends, after what it imported: its importer is the next line
    # one level up.
    modules: dict[str, dict[str, Any]] = {}
    above: dict[int, str] = {}
    for name, own, cumulative, depth in reversed(rows):
        modules[name] = {"own_us": own, "cumulative_us": cumulative, "depth": depth, "parent": above.get(depth - 1)}
        above[depth] = name
    return {"ms": elapsed * 1000, "modules": modules}


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


def warm_up(session: StdioSession, count: int = 50, tool: str = "echo") -> None:
    for request_id in session.ids(count):
        clients.check_echo(session.ask(clients.echo_line(request_id, tool)), request_id)


def legacy_handshake(session: StdioSession, warm: int = 50) -> None:
    """Open a legacy session on the process (initialize, then notifications/initialized), then warm it up
    with legacy echo calls, as warm_up does for the modern ones."""
    request_id = session.ids(1)[0]
    clients.check_initialized(session.ask(clients.encode(clients.legacy_initialize(request_id)) + b"\n"), request_id)
    _write_all(session.stdin, clients.encode(clients.INITIALIZED) + b"\n")
    for request_id in session.ids(warm):
        clients.check_echo(session.ask(clients.legacy_echo_line(request_id)), request_id)


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


def stdio_pipelined(session: StdioSession, count: int, tool: str = "echo",
                    line_of: Callable[[int, str], bytes] = clients.echo_line) -> dict[str, float]:
    """`count` echo requests written ahead by a writer thread; requests per second until the last answer.
    `line_of` builds each request (clients.legacy_echo_line: as a legacy session's client sends it)."""
    ids = session.ids(count)
    data = b"".join(line_of(i, tool) for i in ids)
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


class same_core:
    """Every thread of the client (this process) and of the server on one CPU while a lock-step loop runs.

    A lone round trip's cost is dominated by where the scheduler puts the two processes: on this VM about
    12 µs on one core and 48 µs across two, for the bare loop and every server alike, and a system with
    more threads lands across cores more often. Pinned, the figure is the work of the two sides."""

    def __init__(self, pid: int):
        self.pid = pid
        self.saved: dict[int, set[int]] = {}

    @staticmethod
    def _threads(pid: int) -> list[int]:
        try:
            return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return []

    def __enter__(self) -> same_core:
        cpu = min(os.sched_getaffinity(0))
        for tid in self._threads(self.pid) + self._threads(os.getpid()):
            try:
                self.saved[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, {cpu})
            except OSError:  # a thread that has just ended
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for tid, cpus in self.saved.items():
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass


def stdio_lockstep(session: StdioSession, count: int, tool: str = "echo",
                   line_of: Callable[[int, str], bytes] = clients.echo_line) -> dict[str, float]:
    """One request at a time, client and server on one core (same_core); round-trip percentiles in µs."""
    ids = session.ids(count)
    lines = [line_of(i, tool) for i in ids]
    times = []
    answers = []
    with same_core(session.running.process.pid):
        for line in lines:
            started = time.perf_counter()
            answers.append(session.ask(line))
            times.append(time.perf_counter() - started)
    for raw, request_id in zip(answers, ids):
        clients.check_echo(raw, request_id)
    return {"p50_us": percentile(times, 0.50) * 1e6, "p99_us": percentile(times, 0.99) * 1e6}


class held_call:
    """A `held` call running for as long as the block does: what quick calls are measured beside. The
    tests hold only the order (every quick call answered while it runs); the latencies are measured here."""

    def __init__(self, start: Callable[[dict[str, Any]], None]):
        self.start = start
        self.path = ""

    def __enter__(self) -> held_call:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="bench-held-")
        # Removed at exit, not in __exit__: the held call may not have seen the file by then.
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        self.path = os.path.join(folder, "release")
        self.start(clients.call(0, "held", path=self.path))
        time.sleep(0.2)  # the call is running: a tool that waits in ctx.sleep
        return self

    def __exit__(self, *exc: Any) -> None:
        open(self.path, "w").close()


def _latencies_ms(times: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(times, 0.5) * 1000, "p90_ms": percentile(times, 0.9) * 1000,
            "max_ms": max(times) * 1000}


def stdio_beside_held(session: StdioSession, count: int) -> dict[str, float]:
    """`count` lock-step echo calls while another call runs: round-trip percentiles in ms."""
    times = []
    with held_call(lambda message: _write_all(session.stdin, clients.encode(message) + b"\n")):
        for request_id in session.ids(count):
            started = time.perf_counter()
            raw = session.ask(clients.echo_line(request_id))
            times.append(time.perf_counter() - started)
            clients.check_echo(raw, request_id)
    if json.loads(session.reader.line(STDIO_TIMEOUT)).get("id") != 0:
        raise WrongAnswer("the held call's answer did not come last")
    return _latencies_ms(times)


def http_beside_held(running: systems.Running, clients_count: int, each: int) -> dict[str, float]:
    """`clients_count` clients, each sending `each` echo calls on its own connection, while another call
    runs: round-trip percentiles in ms over every call."""
    times: list[float] = []
    failures: list[BaseException] = []
    held_answer: list[clients.HttpResponse] = []

    def hold(message: dict[str, Any]) -> None:
        client = clients.HttpClient("127.0.0.1", running.port, timeout=150)
        request = client.request_bytes(clients.encode(message), name="held")
        worker = threading.Thread(target=lambda: held_answer.append(client.send(request)), daemon=True)
        worker.start()

    def quick(first: int) -> None:
        client = clients.HttpClient("127.0.0.1", running.port)
        try:
            for request_id in range(first, first + each):
                started = time.perf_counter()
                response = client.send(_http_echo(client, request_id))
                times.append(time.perf_counter() - started)
                _check_http_echo(client, response, request_id)
        except BaseException as exc:  # reported below, on the measuring thread
            failures.append(exc)
        finally:
            client.close()

    with held_call(hold):
        threads = [threading.Thread(target=quick, args=(1 + n * each,)) for n in range(clients_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(STDIO_TIMEOUT)
        if held_answer:
            raise WrongAnswer("the held call ended before the quick calls did")
    if failures:
        raise WrongAnswer(f"{len(failures)} quick client(s) failed: {failures[0]}")
    return _latencies_ms(times)


def stdio_progress(session: StdioSession, count: int) -> dict[str, float]:
    """tools/call steps(count) with a progress token: the notifications received before the answer, per
    second from the request written to the answer read. Over stdio none may be dropped."""
    request_id = session.ids(1)[0]
    line = clients.encode(clients.progress_call(request_id, count)) + b"\n"
    started = time.perf_counter()
    _write_all(session.stdin, line)
    lines = session.reader.through_last(b"notifications/progress", STDIO_TIMEOUT)
    elapsed = time.perf_counter() - started
    received = clients.check_progress(lines, request_id, count)
    if received != count:
        raise WrongAnswer(f"id {request_id}: {received} progress notifications, expected {count}")
    return {"per_s": received / elapsed, "emitted_per_s": count / elapsed, "received": received, "count": count}


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


def http_ready(system: systems.System, log_dir: str) -> float:
    """Milliseconds from spawning an HTTP server to its answer to one tools/call echo: the client tries
    to connect every millisecond from the spawn on, and sends the request once a connection is taken."""
    request_id = 1
    started = time.perf_counter()
    running = systems.start(system, log_dir, wait_ready=False)
    try:
        client = clients.HttpClient("127.0.0.1", running.port)
        deadline = time.monotonic() + STDIO_TIMEOUT
        while True:
            try:
                client.sock = client._connect()
                break
            except ConnectionRefusedError:
                if running.process.poll() is not None:
                    raise RuntimeError(f"{system.label} exited with {running.process.returncode} while starting; "
                                       f"see {running.log.name}") from None
                if time.monotonic() > deadline:
                    raise clients.Timeout(f"not listening within {STDIO_TIMEOUT:.0f} s") from None
                time.sleep(0.001)
        response = client.send(_http_echo(client, request_id))
        elapsed = time.perf_counter() - started
        client.close()
    finally:
        systems.stop(running)
    _check_http_echo(client, response, request_id)
    return elapsed * 1000


def http_progress(running: systems.Running, count: int) -> dict[str, float]:
    """tools/call steps(count) with a progress token, answered as an SSE stream: the progress frames
    received before the answer, per second from the request sent to the stream's end. The server may
    coalesce progress a stream has not sent yet (keeping the latest), so `received` can be below `count`;
    `emitted_per_s` is what the tool produced: `count` over the same time."""
    client = clients.HttpClient("127.0.0.1", running.port)
    request_id = 1
    try:
        request = client.request_bytes(clients.encode(clients.progress_call(request_id, count)), name="steps")
        started = time.perf_counter()
        response = client.send(request)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    if response.status != 200 or not response.headers.get("content-type", "").startswith("text/event-stream"):
        raise WrongAnswer(f"HTTP {response.status} {response.headers.get('content-type')}, not an SSE stream: "
                          f"{response.body[:200]!r}")
    frames = [frame for frame in response.body.split(b"\n\n") if frame.strip()]
    if any(not frame.startswith(b"data: ") for frame in frames):
        raise WrongAnswer(f"a frame without data: {next(f for f in frames if not f.startswith(b'data: '))[:120]!r}")
    received = clients.check_progress([frame[len(b"data: "):] for frame in frames], request_id, count)
    return {"per_s": received / elapsed, "emitted_per_s": count / elapsed, "received": received, "count": count}


def http_sequential(running: systems.Running, count: int, authorization: Optional[str] = None) -> dict[str, float]:
    """`count` echo requests one after another on one keep-alive connection (a new one whenever the
    server closes it): requests per second and round-trip percentiles in microseconds. With
    `authorization`, every request carries that Authorization header."""
    client = clients.HttpClient("127.0.0.1", running.port)
    try:
        for request_id in range(1, 21):  # warm-up
            _check_http_echo(client, client.send(_http_echo(client, request_id, authorization)), request_id)
        client.connections = 0
        requests = [_http_echo(client, request_id, authorization) for request_id in range(100, 100 + count)]
        times, answers, elapsed = _timed_sends(client, requests)
    finally:
        client.close()
    for request_id, response in enumerate(answers, start=100):
        _check_http_echo(client, response, request_id)
    return {"rps": count / elapsed, "p50_us": percentile(times, 0.5) * 1e6, "p99_us": percentile(times, 0.99) * 1e6,
            "connections": client.connections}


def _timed_sends(client: clients.HttpClient, requests: list[bytes]) -> tuple[list[float], list[Any], float]:
    """Each request sent and its answer read, one after another: each round trip's time, the answers, the total."""
    times, answers = [], []
    started = time.perf_counter()
    for request in requests:
        begun = time.perf_counter()
        answers.append(client.send(request))
        times.append(time.perf_counter() - begun)
    return times, answers, time.perf_counter() - started


def http_legacy_sequential(running: systems.Running, count: int) -> dict[str, float]:
    """http_sequential in a legacy session: initialize (keeping the Mcp-Session-Id the server mints, if
    it does), notifications/initialized, then `count` echo requests as a 2025-11-25 client sends them,
    one after another on one keep-alive connection. Answers may be JSON or an SSE stream; both are read
    whole, and checked after the clock stops."""
    client = clients.HttpClient("127.0.0.1", running.port)
    try:
        opened = client.send(clients.legacy_http_request(client, clients.encode(clients.legacy_initialize(0)), None,
                                                         False))
        if opened.status != 200:
            raise WrongAnswer(f"initialize: HTTP {opened.status}: {opened.body[:200]!r}")
        clients.check_initialized(clients.message_of(opened), 0)
        session_id = opened.headers.get("mcp-session-id")
        acknowledged = client.send(clients.legacy_http_request(client, clients.encode(clients.INITIALIZED), session_id,
                                                               True))
        if acknowledged.status not in (200, 202):
            raise WrongAnswer(f"notifications/initialized: HTTP {acknowledged.status}: {acknowledged.body[:200]!r}")

        def echo(request_id: int) -> bytes:
            return clients.legacy_http_request(client, clients.legacy_echo_line(request_id)[:-1], session_id, True)

        for request_id in range(1, 21):  # warm-up
            _check_legacy_http_echo(client.send(echo(request_id)), request_id)
        client.connections = 0
        requests = [echo(request_id) for request_id in range(100, 100 + count)]
        times, answers, elapsed = _timed_sends(client, requests)
    finally:
        client.close()
    for request_id, response in enumerate(answers, start=100):
        _check_legacy_http_echo(response, request_id)
    return {"rps": count / elapsed, "p50_us": percentile(times, 0.5) * 1e6, "p99_us": percentile(times, 0.99) * 1e6,
            "connections": client.connections, "session": 1.0 if session_id else 0.0}


def _check_legacy_http_echo(response: clients.HttpResponse, request_id: int) -> None:
    if response.status != 200:
        raise WrongAnswer(f"HTTP {response.status}: {response.body[:200]!r}")
    clients.check_echo(clients.message_of(response), request_id)


def http_fresh_tokens(running: systems.Running, tokens: list[str], cached: str) -> dict[str, float]:
    """What a token the server has not seen costs end to end: one echo request per token in `tokens`
    (each new to the server, so each is verified), alternating with a request carrying `cached` (known,
    so a cache hit), on one keep-alive connection; the p50 of each in microseconds."""
    client = clients.HttpClient("127.0.0.1", running.port)
    try:
        for request_id in range(1, 11):  # warm-up, and `cached` into the cache
            _check_http_echo(client, client.send(_http_echo(client, request_id, f"Bearer {cached}")), request_id)
        fresh: list[float] = []
        known: list[float] = []
        answers: list[tuple[int, clients.HttpResponse]] = []
        for token in tokens:
            for authorization, times in ((f"Bearer {token}", fresh), (f"Bearer {cached}", known)):
                request_id = 100 + len(answers)
                request = _http_echo(client, request_id, authorization)
                started = time.perf_counter()
                answers.append((request_id, client.send(request)))
                times.append(time.perf_counter() - started)
    finally:
        client.close()
    for request_id, response in answers:
        _check_http_echo(client, response, request_id)
    return {"fresh_p50_us": percentile(fresh, 0.5) * 1e6, "cached_p50_us": percentile(known, 0.5) * 1e6,
            "extra_us": (percentile(fresh, 0.5) - percentile(known, 0.5)) * 1e6, "tokens": len(tokens)}


def _http_echo(client: clients.HttpClient, request_id: int, authorization: Optional[str] = None) -> bytes:
    return client.request_bytes(clients.echo_line(request_id)[:-1], name="echo", authorization=authorization)


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
