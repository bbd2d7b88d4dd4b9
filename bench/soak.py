"""make soak: minutes of mixed load on a live stdio server and a live HTTP server, their RSS, threads,
open files and zombie children sampled from /proc; writes its figures into docs/reports/performance.md.

    python bench/soak.py                    # 10 minutes
    python bench/soak.py --minutes 1 --no-doc

Load, all at once, for the whole run:
- stdio (one process, one pipe, requests in flight together): small echoes; 500 KB echoes; 5 MB
  results; calls with progress; calls cancelled mid-way (notifications/cancelled); malformed lines and
  notifications (fuzzed messages from tests/fuzz, and fixed ones).
- HTTP: small requests on keep-alive connections; 500 KB up and 5 MB down; slow clients (a body sent
  in small pieces, a 5 MB answer read slowly); clients that hang up mid-request (half a body, or before
  the answer); calls with progress over SSE, some cancelled by closing the stream; malformed bodies and
  headers; broken framing; slowloris connections trickling a request head a byte a second; a legacy-era
  client (initialize, calls in its Mcp-Session-Id session, DELETE, each legacy revision in turn); task
  calls (the tasks extension declared, tasks/get polled to completed).
- Held on the HTTP server all along (--hold-listeners, --hold-slow; 500 each by default): listen
  streams (subscriptions/listen on a resource that a `tick` call updates every 2 s), and slow
  connections, half trickling a request head, half a body after a whole head; each renewed when it
  ends. Two client threads drive them all (selectors); latencies of the quick calls are recorded.

The rule (a server passes when all hold):
- 0 errors: every answer right and in time (an echo's text, a result's size, the id, a 4xx rather than
  a 5xx for the malformed), no answer for a cancelled call, no traceback on the server's stderr (one
  from a bug tests/fuzz/fuzz_known.py lists as open is counted apart, and messages that would take a
  server down through such a bug are not sent), no server death, a slowloris connection closed by the
  server within its head deadline plus 5 s, and a clean exit (status 0) on SIGTERM at the end. Held:
  each listen stream hears every update published while it was acknowledged, none ends or is refused;
  a slow head is answered 408 and closed at the head deadline, a slow body closed at the read timeout
  (plus 5 s; one closed early for a newcomer at the connection limit is counted, not an error).
- Flat after warm-up: load stops for a moment after the warm-up (the first 10% of the run, at least 30 s)
  and again at the end; at each pause, with every client gone and TRIM_SECONDS + 2 s to settle (the HTTP
  server gives malloc's free pages back every TRIM_SECONDS), the server's threads, open files and
  zombie children are counted and its RSS read. At the end, threads and open files must not exceed the
  post-warm-up pause (the HTTP server's threads: nor its workers' bound, 64, + 16, as its pool retires a
  worker only after 60 s idle, longer than a pause unless --settle-seconds says more), there must be no
  zombie, and RSS must be within 10% + 8 MiB of it. During load, the median RSS of the last third of the
  samples must be within 10% + 8 MiB of the first third's.
  With connections held, the HTTP server's threads under load stay within its workers (64) + 16.
"""

from __future__ import annotations

import argparse
import array
import atexit
import collections
import datetime
import hashlib
import json
import os
import platform
import queue
import random
import re
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Optional

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path[:0] = [os.path.join(ROOT, "tests", "fuzz"), os.path.join(ROOT, "server")]

import fuzz_check  # noqa: E402  the fuzzer's generators and checks make the malformed traffic
import fuzz_drive  # noqa: E402
import fuzz_gen  # noqa: E402
import fuzz_known  # noqa: E402
from mcpserver._malloc import TRIM_SECONDS  # noqa: E402
from mcpserver.httpd import DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_REQUESTS, DEFAULT_READ_TIMEOUT  # noqa: E402
from mcpserver.legacy import LEGACY_VERSIONS  # noqa: E402

TARGET = os.path.join(BENCH, "soak_server.py")
DOC = os.path.join(ROOT, "docs", "reports", "performance.md")
RESULTS = os.path.join(BENCH, "results")
MARK_START, MARK_END = "<!-- soak: start (written by make soak) -->", "<!-- soak: end -->"
META = {fuzz_gen.META_VERSION: fuzz_gen.VERSION, fuzz_gen.META_CAPABILITIES: {}}
KB500, MB5 = 500_000, 5_000_000
ANSWER_TIMEOUT = 60.0
HEADER_TIMEOUT = DEFAULT_HEADER_TIMEOUT  # the server runs with its default limits
# Held connections must cost the HTTP server no thread: under load its threads stay within the workers'
# bound (--max-requests) plus this many (the loop, task threads, the task store's), whatever is held.
THREAD_SLACK = 16
TASKS_META = {fuzz_gen.META_CAPABILITIES: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
# The server keeps a finished task for its TTL (an hour) and at most 1,000 unexpired ones per owner (one
# owner without auth): one task every 4 s stays under that bound however long the soak runs.
TASK_EVERY = 4.0
LEGACY_CALLS_PER_SESSION = 200
MIB = 1024 * 1024


def request(id: Any, method: str, **params: Any) -> dict[str, Any]:
    meta = dict(META, **params.pop("meta", {}))
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": meta, **params}}


def call(id: Any, tool: str, meta: Optional[dict[str, Any]] = None, **arguments: Any) -> dict[str, Any]:
    return request(id, "tools/call", name=tool, arguments=arguments, meta=meta or {})


def text_of(response: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in response.get("result", {}).get("content", []))


class Tally:
    """Operations and errors, by kind, from every client thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: collections.Counter[str] = collections.Counter()
        self.bytes: collections.Counter[str] = collections.Counter()
        self.errors: collections.Counter[str] = collections.Counter()
        self.examples: dict[str, str] = {}
        self.latencies: collections.defaultdict[str, array.array[float]] = collections.defaultdict(
            lambda: array.array("d"))  # seconds, by kind: 8 bytes a call keeps ten minutes of them cheap

    def op(self, kind: str, size: int = 0) -> None:
        with self.lock:
            self.ops[kind] += 1
            self.bytes[kind] += size

    def error(self, kind: str, detail: str) -> None:
        with self.lock:
            self.errors[kind] += 1
            self.examples.setdefault(kind, detail[:500])
        print(f"soak: ERROR {kind}: {detail[:300]}", file=sys.stderr, flush=True)

    def timed(self, kind: str, started: float) -> None:
        """A quick call's latency, from `started` (time.monotonic()) to now."""
        elapsed = time.monotonic() - started
        with self.lock:
            self.latencies[kind].append(elapsed)

    def latency_summary(self) -> dict[str, dict[str, float]]:
        """Per kind: how many, and the median, p90, p99 and maximum in milliseconds."""
        with self.lock:
            kinds = {kind: sorted(values) for kind, values in self.latencies.items() if values}
        return {kind: {"n": len(v), **{name: v[min(len(v) - 1, int(q * len(v)))] * 1000 for name, q in
                                       (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))}}
                for kind, v in kinds.items()}


# ---------------------------------------------------------------------------------------------
# The servers, and what /proc says about them


class Process:
    def __init__(self, name: str, argv: list[str], stdin: Any):
        self.name = name
        self.process = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE if stdin is subprocess.PIPE else
                                        subprocess.DEVNULL, stderr=subprocess.PIPE, bufsize=0)
        self.stderr: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        atexit.register(self._kill)  # a soak stopped early (^C, SIGTERM, a crash) leaves no server running

    def _kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for raw in iter(self.process.stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.stderr.append(line)
            if " at http://" in line or "over stdio" in line:
                self.ready.set()
        self.ready.set()

    def faults(self) -> list[fuzz_drive.Finding]:
        """Tracebacks and errors on its stderr, as the fuzzer reads them."""
        return fuzz_drive.stderr_findings("".join(self.stderr), ())

    def sample(self) -> dict[str, float]:
        pid = self.process.pid
        status = dict(line.split(":", 1) for line in _read(f"/proc/{pid}/status").splitlines() if ":" in line)
        rss = int(status.get("VmRSS", "0 kB").split()[0]) / 1024
        threads = int(status.get("Threads", "0"))
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            fds = 0
        return {"rss_mib": rss, "threads": threads, "fds": fds, "zombies": _zombie_children(pid),
                "children": _children(pid)}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return ""


def _child_states(pid: int) -> list[str]:
    states = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _read(f"/proc/{entry}/stat")
            fields = stat.rsplit(")", 1)[-1].split()
            if len(fields) > 2 and fields[1] == str(pid):
                states.append(fields[0])
    return states


def _zombie_children(pid: int) -> int:
    return sum(state == "Z" for state in _child_states(pid))


def _children(pid: int) -> int:
    return len(_child_states(pid))


# ---------------------------------------------------------------------------------------------
# stdio: one pipe shared by many client threads, answers routed by id


class StdioClient:
    def __init__(self, server: Process, tally: Tally):
        self.server = server
        self.tally = tally
        assert server.process.stdin is not None and server.process.stdout is not None
        self.stdin = server.process.stdin
        self.write_lock = threading.Lock()
        self.lock = threading.Lock()
        self.waiting: dict[str, queue.SimpleQueue[Any]] = {}
        self.cancelled: dict[str, float] = {}
        self.idless_expected = 0
        self.idless_received = 0
        self.other_expected: collections.Counter[Any] = collections.Counter()
        self.counter = 0
        threading.Thread(target=self._read, args=(server.process.stdout,), daemon=True).start()

    def next_id(self, kind: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{kind}-{self.counter}"

    def _read(self, stream: Any) -> None:
        import io

        with io.BufferedReader(stream, 1 << 20) as reader:
            for line in iter(reader.readline, b""):
                try:
                    message = json.loads(line)
                except ValueError:
                    self.tally.error("stdio: stdout line is not JSON", line[:200].decode("latin-1"))
                    continue
                self._route(message, len(line))

    def _route(self, message: Any, size: int) -> None:
        if not isinstance(message, dict):
            self.tally.error("stdio: answer is not an object", str(message)[:200])
            return
        if "id" not in message:
            if message.get("method") == "notifications/progress":
                token = message.get("params", {}).get("progressToken")
                target = self.waiting.get(str(token))
                if target is not None:
                    target.put(("note", message))
                elif str(token) not in self.cancelled:
                    self.tally.error("stdio: progress for no request in flight", str(message)[:200])
                return
            with self.lock:
                self.idless_received += 1
            return
        answer_id = message["id"]
        with self.lock:
            target = self.waiting.pop(answer_id, None) if isinstance(answer_id, str) else None
            cancelled_at = self.cancelled.get(answer_id) if isinstance(answer_id, str) else None
        if target is not None:
            target.put(("answer", message, size))
        elif cancelled_at is not None:
            late = time.monotonic() - cancelled_at
            self.tally.error("stdio: answered after its cancel",
                             f"{late:.2f} s after notifications/cancelled: {str(message)[:200]}")
        else:
            with self.lock:
                key = (type(answer_id).__name__, answer_id)
                if self.other_expected[key] > 0:
                    self.other_expected[key] -= 1
                    return
            self.tally.error("stdio: answer for an id never sent", str(message)[:200])

    def send(self, data: bytes) -> None:
        with self.write_lock:
            self.stdin.write(data + b"\n")

    def start(self, message: dict[str, Any]) -> queue.SimpleQueue[Any]:
        box: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self.lock:
            self.waiting[message["id"]] = box
            token = message["params"]["_meta"].get("progressToken")
            if token is not None:
                self.waiting[str(token)] = box
        self.send(json.dumps(message).encode())
        return box

    def wait(self, message: dict[str, Any], box: queue.SimpleQueue[Any],
             timeout: float = ANSWER_TIMEOUT) -> tuple[Optional[dict[str, Any]], list[Any], int]:
        notes: list[Any] = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                item = box.get(timeout=max(0.0, deadline - time.monotonic()))
                if item[0] == "note":
                    notes.append(item[1])
                else:
                    return item[1], notes, item[2]
        except queue.Empty:
            self.tally.error("stdio: no answer in time", f"{timeout:g} s: {str(message)[:200]}")
            return None, notes, 0
        finally:
            token = message["params"]["_meta"].get("progressToken")
            with self.lock:
                self.waiting.pop(message["id"], None)
                if token is not None:
                    self.waiting.pop(str(token), None)

    def ask(self, message: dict[str, Any],
            timeout: float = ANSWER_TIMEOUT) -> tuple[Optional[dict[str, Any]], list[Any], int]:
        return self.wait(message, self.start(message), timeout)

    def cancel(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.cancelled[message["id"]] = time.monotonic()
            token = message["params"]["_meta"].get("progressToken")
            if token is not None:
                self.cancelled[str(token)] = time.monotonic()
            self.waiting.pop(message["id"], None)
            self.waiting.pop(str(token), None)
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": message["id"], "reason": "soak"}}
        self.send(json.dumps(note).encode())

    def malformed(self, data: bytes) -> None:
        """Send a malformed line; remember which answers it must bring (by id, or id-less)."""
        for segment in fuzz_check.stdio_segments(data):
            expected = fuzz_check.expect(segment, http=False)
            if expected.answered:
                with self.lock:
                    if expected.id is fuzz_check.ABSENT:
                        self.idless_expected += 1
                    else:
                        self.other_expected[(type(expected.id).__name__, expected.id)] += 1
        self.send(data)


def check_echo(tally: Tally, kind: str, response: Optional[dict[str, Any]], text: str) -> None:
    if response is None:
        return
    got = text_of(response)
    if got != text:
        tally.error(f"{kind}: wrong echo", f"sent {len(text)} characters (sha256 "
                    f"{hashlib.sha256(text.encode()).hexdigest()[:12]}), got {len(got)}: {str(response)[:200]}")


def stdio_workloads(client: StdioClient, tally: Tally, stop: threading.Event, seed: int,
                    cancels: bool) -> list[Callable[[], None]]:
    generator = malformed_generator()

    def small() -> None:
        rng = random.Random(f"{seed}:stdio-small")
        while not stop.is_set():
            text = "x" * rng.randrange(1, 2000)
            message = call(client.next_id("small"), "echo", text=text)
            started = time.monotonic()
            response, _, size = client.ask(message)
            tally.timed("stdio small echo", started)
            check_echo(tally, "stdio small echo", response, text)
            tally.op("stdio small echo", size)
            stop.wait(0.001)  # steady, not flat out: the machine is shared

    def payloads() -> None:
        rng = random.Random(f"{seed}:stdio-payload")
        while not stop.is_set():
            if rng.random() < 0.7:
                text = "é" * (KB500 // 2)  # 500 KB of UTF-8
                response, _, size = client.ask(call(client.next_id("up"), "echo", text=text))
                check_echo(tally, "stdio 500 KB echo", response, text)
                tally.op("stdio 500 KB echo", size)
            else:
                response, _, size = client.ask(call(client.next_id("down"), "big", size=MB5))
                if response is not None and len(text_of(response)) != MB5:
                    tally.error("stdio 5 MB result: wrong size", str(response)[:200])
                tally.op("stdio 5 MB result", size)
            stop.wait(0.2)

    def progress() -> None:
        while not stop.is_set():
            identifier = client.next_id("progress")
            message = call(identifier, "count", meta={"progressToken": identifier}, to=5, delay=0.02)
            response, notes, _ = client.ask(message)
            if response is not None:
                values = [n["params"]["progress"] for n in notes]
                if text_of(response) != "counted to 5" or values != sorted(set(values)) or not values:
                    tally.error("stdio progress: wrong answer or progress", f"{values} {str(response)[:200]}")
            tally.op("stdio call with progress")

    def cancelling() -> None:
        while not stop.is_set():
            identifier = client.next_id("cancel")
            message = call(identifier, "count", meta={"progressToken": identifier}, to=100, delay=0.05)
            box = client.start(message)
            try:
                box.get(timeout=5)  # the first progress: the call is running
            except queue.Empty:
                tally.error("stdio cancel: no progress before the cancel", str(message)[:200])
            client.cancel(message)
            tally.op("stdio cancelled call")
            stop.wait(0.3)

    def malformed() -> None:
        rng = random.Random(f"{seed}:stdio-malformed")
        index = 0
        while not stop.is_set():
            index += 1
            data = generator.message(random.Random(f"{seed}:soak-stdio:{index}")).data
            skip = fuzz_known.kills_a_server(data, "stdio")
            if skip:
                tally.op(f"stdio malformed line not sent ({skip})")
                continue
            if b"\n" in data or rng.random() < 0.2:
                data = rng.choice([b'{"jsonrpc":"2.0","id":', b"[" * 65 + b"]" * 65, b"\xff\xfe", b"{}",
                                   b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}'])
            client.malformed(data)
            tally.op("stdio malformed line", len(data))
            stop.wait(0.01)

    workloads = [small, small, payloads, progress, malformed]
    if cancels:
        workloads.append(cancelling)
    return workloads


# ---------------------------------------------------------------------------------------------
# HTTP: raw sockets, so clients can be slow, hang up, or send what no library would


class HttpTarget:
    def __init__(self, server: Process):
        text = "".join(server.stderr)
        match = re.search(r"at http://(\[[^\]]+\]|[^:/]+):(\d+)(/\S*)", text)
        if match is None:
            raise RuntimeError(f"the HTTP server did not start:\n{text}")
        self.host, self.port, self.path = match.group(1).strip("[]"), int(match.group(2)), match.group(3)

    def connect(self, timeout: float = ANSWER_TIMEOUT) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def head(self, message: Any, body: bytes, accept: str = "application/json, text/event-stream") -> bytes:
        headers = [(k, v) for k, v in fuzz_gen.mirrored_headers(message, fuzz_gen.Target([], [], [], []))
                   if k != "Accept"]
        lines = [f"POST {self.path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", f"Accept: {accept}",
                 *(f"{k}: {v}" for k, v in headers), f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Connection:
    """One keep-alive connection that reconnects when the server closes it."""

    def __init__(self, target: HttpTarget):
        self.target = target
        self.sock: Optional[socket.socket] = None
        self.buffer = bytearray()

    def exchange(self, message: Any, body: Optional[bytes] = None,
                 head: Optional[bytes] = None) -> fuzz_drive.HttpResponse:
        data = body if body is not None else json.dumps(message).encode()
        if self.sock is None:
            self.sock = self.target.connect()
            self.buffer.clear()
        self.sock.sendall((head if head is not None else self.target.head(message, data)) + data)
        response = fuzz_drive.read_response(self.sock, self.buffer, time.monotonic() + ANSWER_TIMEOUT)
        if response is None:
            raise ConnectionError("the server closed the connection without an answer")
        if response.headers.get("connection", "").lower() == "close":
            self.close()
        return response

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def legacy_head(target: HttpTarget, body: bytes, session: Optional[str] = None, revision: Optional[str] = None,
                method: str = "POST") -> bytes:
    """A legacy-era client's request head: no Mcp-Method or Mcp-Name, the session's id and revision."""
    lines = [f"{method} {target.path} HTTP/1.1", f"Host: 127.0.0.1:{target.port}"]
    if method == "POST":
        lines += ["Content-Type: application/json", "Accept: application/json, text/event-stream"]
    if session is not None:
        lines.append(f"Mcp-Session-Id: {session}")
    if revision is not None:
        lines.append(f"MCP-Protocol-Version: {revision}")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _json_or_sse_answer(tally: Tally, kind: str, response: fuzz_drive.HttpResponse,
                        expected_id: Any) -> Optional[dict[str, Any]]:
    """The answer of a request that accepted both: JSON, or the last frame of an SSE stream."""
    if response.status == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
        frames, problem = fuzz_drive.sse_messages(response.body)
        answer = frames[-1] if frames and isinstance(frames[-1], dict) else {}
        if problem or answer.get("id") != expected_id:
            tally.error(f"{kind}: wrong stream", f"{problem} {str(frames)[-300:]}")
            return None
        return answer
    return _json_answer(tally, kind, response, expected_id)


def _json_answer(tally: Tally, kind: str, response: fuzz_drive.HttpResponse,
                 expected_id: Any) -> Optional[dict[str, Any]]:
    if response.status != 200 or not response.headers.get("content-type", "").startswith("application/json"):
        tally.error(f"{kind}: HTTP {response.status}", response.body[:200].decode("latin-1"))
        return None
    answer = json.loads(response.body)
    if answer.get("id") != expected_id:
        tally.error(f"{kind}: wrong id", str(answer)[:200])
    return answer


def http_workloads(target: HttpTarget, tally: Tally, stop: threading.Event, seed: int, cancels: bool,
                   held: Optional[Held] = None, tick_seconds: float = 2.0, legacy_sessions: bool = True,
                   task_calls: bool = True) -> list[Callable[[], None]]:
    generator = malformed_generator()
    counter = iter(range(1, 1 << 62))

    def guarded(kind: str, body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            while not stop.is_set():
                try:
                    body()
                except (OSError, ConnectionError, ValueError) as exc:
                    tally.error(f"{kind}: {type(exc).__name__}", str(exc))
                    stop.wait(0.5)
        return run

    def small() -> None:
        connection = Connection(target)
        rng = random.Random(f"{seed}:http-small:{threading.get_ident()}")
        try:
            while not stop.is_set():
                text = "y" * rng.randrange(1, 2000)
                identifier = next(counter)
                started = time.monotonic()
                response = connection.exchange(call(identifier, "echo", text=text))
                tally.timed("http small echo", started)
                answer = _json_answer(tally, "http small echo", response, identifier)
                check_echo(tally, "http small echo", answer, text)
                tally.op("http small echo", len(text))
                stop.wait(0.001)
        finally:
            connection.close()

    def payloads() -> None:
        connection = Connection(target)
        rng = random.Random(f"{seed}:http-payload")
        try:
            while not stop.is_set():
                identifier = next(counter)
                if rng.random() < 0.7:
                    text = "ü" * (KB500 // 2)
                    answer = _json_answer(tally, "http 500 KB echo",
                                          connection.exchange(call(identifier, "echo", text=text)), identifier)
                    check_echo(tally, "http 500 KB echo", answer, text)
                    tally.op("http 500 KB echo", KB500)
                else:
                    answer = _json_answer(tally, "http 5 MB result",
                                          connection.exchange(call(identifier, "big", size=MB5)), identifier)
                    if answer is not None and len(text_of(answer)) != MB5:
                        tally.error("http 5 MB result: wrong size", str(answer)[:200])
                    tally.op("http 5 MB result", MB5)
                stop.wait(0.2)
        finally:
            connection.close()

    def slow_clients() -> None:
        """A 500 KB body sent in 16 KB pieces 20 ms apart (about 0.6 s), then a 5 MB answer read 64 KB at a time."""
        identifier = next(counter)
        text = "s" * KB500
        message = call(identifier, "echo", text=text)
        body = json.dumps(message).encode()
        sock = target.connect()
        try:
            sock.sendall(target.head(message, body))
            for start in range(0, len(body), 16_384):
                sock.sendall(body[start:start + 16_384])
                time.sleep(0.02)
            buffer = bytearray()
            answer = _json_answer(tally, "http slow upload",
                                  fuzz_drive.read_response(sock, buffer, time.monotonic() + ANSWER_TIMEOUT)
                                  or fuzz_drive.HttpResponse(0, {}, b""), identifier)
            check_echo(tally, "http slow upload", answer, text)
            tally.op("http slow upload", len(body))
            identifier = next(counter)
            message = call(identifier, "big", size=MB5)
            body = json.dumps(message).encode()
            sock.sendall(target.head(message, body) + body)
            received = 0
            sock.settimeout(ANSWER_TIMEOUT)
            while received < MB5:  # the head and body, slowly; the size is checked, not parsed
                chunk = sock.recv(65_536)
                if not chunk:
                    tally.error("http slow download: closed early", f"after {received} bytes")
                    break
                received += len(chunk)
                time.sleep(0.005)
            tally.op("http slow download", received)
        finally:
            sock.close()

    def hang_ups() -> None:
        """Half a body then gone; a whole request then gone before the answer; a slow call then gone."""
        identifier = next(counter)
        message = call(identifier, "echo", text="h" * KB500)
        body = json.dumps(message).encode()
        for cut in (len(body) // 2, len(body)):
            sock = target.connect()
            sock.sendall(target.head(message, body) + body[:cut])
            sock.close()
        message = call(next(counter), "count", to=100, delay=0.05)
        body = json.dumps(message).encode()
        sock = target.connect()
        sock.sendall(target.head(message, body, accept="application/json") + body)
        time.sleep(0.3)
        sock.close()  # the server's watcher cancels it
        tally.op("http hang-ups", 3)
        stop.wait(0.2)

    def progress_streams() -> None:
        """A call with progress read to its end over SSE; then one whose stream is closed after the first frame."""
        identifier = next(counter)
        message = call(identifier, "count", meta={"progressToken": identifier}, to=5, delay=0.02)
        body = json.dumps(message).encode()
        sock = target.connect()
        try:
            sock.sendall(target.head(message, body) + body)
            response = fuzz_drive.read_response(sock, bytearray(), time.monotonic() + ANSWER_TIMEOUT)
        finally:
            sock.close()
        if response is None or response.status != 200:
            tally.error("http progress stream: no stream", str(response)[:200])
        else:
            frames, problem = fuzz_drive.sse_messages(response.body)
            if problem or not frames or frames[-1].get("id") != identifier or len(frames) < 2:
                tally.error("http progress stream: wrong frames", f"{problem} {str(frames)[-300:]}")
        tally.op("http call with progress (SSE)")
        if not cancels:
            return
        identifier = next(counter)
        message = call(identifier, "count", meta={"progressToken": identifier}, to=100, delay=0.05)
        body = json.dumps(message).encode()
        sock = target.connect()
        try:
            sock.sendall(target.head(message, body) + body)
            sock.settimeout(10)
            first = sock.recv(65_536)
            if b"notifications/progress" not in first and b"text/event-stream" not in first:
                tally.error("http cancel: the stream did not start", first[:200].decode("latin-1"))
        finally:
            sock.close()  # closing the stream cancels the call
        tally.op("http cancelled stream")
        stop.wait(0.3)

    def malformed() -> None:
        rng = random.Random(f"{seed}:http-malformed:{threading.get_ident()}")
        index = 0
        while not stop.is_set():
            index += 1
            if rng.random() < 0.2:
                raw = fuzz_drive.framing_request(rng, target.path).replace(b"{PORT}", str(target.port).encode())
                sock = target.connect(timeout=HEADER_TIMEOUT + 10)
                try:
                    try:
                        sock.sendall(raw)
                        sock.shutdown(socket.SHUT_WR)
                    except OSError:  # the server refused the head and hung up early: read its answer
                        pass
                    buffer = bytearray()
                    responses: list[fuzz_drive.HttpResponse] = []
                    while True:
                        response = fuzz_drive.read_response(sock, buffer, time.monotonic() + HEADER_TIMEOUT + 10,
                                                            raw.startswith(b"HEAD "))
                        if response is None:
                            break
                        responses.append(response)
                        if response.status >= 500 and response.status not in (501, 503, 505):
                            tally.error(f"http broken framing: HTTP {response.status}", repr(raw[:200]))
                except (ConnectionResetError, BrokenPipeError):
                    pass
                finally:
                    sock.close()
                if fuzz_drive.smuggled(raw, responses):
                    tally.error("http broken framing: the body ran as a request", repr(raw[:200]))
                tally.op("http broken framing")
                continue
            message = generator.message(random.Random(f"{seed}:soak-http:{index}"))
            skip = fuzz_known.kills_a_server(message.data, "http")
            if skip:
                tally.op(f"http malformed request not sent ({skip})")
                continue
            head = ["POST " + target.path + " HTTP/1.1", f"Host: 127.0.0.1:{target.port}"]
            headers = message.headers or fuzz_gen.mirrored_headers(fuzz_check.decode(message.data)[1],
                                                                    fuzz_gen.Target([], [], [], []))
            head += [f"{k}: {v.translate(fuzz_drive._NO_LINE_BREAKS)}" for k, v in headers
                     if k.lower() not in ("host", "content-length")]
            head.append(f"Content-Length: {len(message.data)}")
            sock = target.connect()
            try:
                try:
                    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogatepass") + message.data)
                except OSError:  # refused on its head (431, 400) and hung up before the body was sent
                    pass
                response = fuzz_drive.read_response(sock, bytearray(), time.monotonic() + ANSWER_TIMEOUT)
            finally:
                sock.close()
            if response is None:
                tally.error("http malformed: no answer", repr(message.data[:200]))
            elif response.status >= 500 and response.status not in (501, 503, 505):
                tally.error(f"http malformed: HTTP {response.status}", repr(message.data[:200]))
            tally.op("http malformed request", len(message.data))
            stop.wait(0.01)

    def slowloris() -> None:
        """A request head a byte a second: the server must hang up within its head deadline."""
        sock = target.connect(timeout=HEADER_TIMEOUT + 10)
        started = time.monotonic()
        try:
            sock.sendall(b"POST " + target.path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            while not stop.is_set():
                time.sleep(1)
                try:
                    sock.sendall(b"a")
                except OSError:
                    break
                if time.monotonic() - started > HEADER_TIMEOUT + 5:
                    tally.error("http slowloris: still open past the head deadline",
                                f"{time.monotonic() - started:.0f} s")
                    break
        finally:
            sock.close()
        tally.op("http slowloris connection")

    def legacy() -> None:
        """A legacy-era client: initialize, then calls in its session (Mcp-Session-Id); after
        LEGACY_CALLS_PER_SESSION, DELETE it (then its id must be unknown) and open the next, each
        revision in turn."""
        connection = Connection(target)
        rng = random.Random(f"{seed}:http-legacy")
        sessions = 0
        try:
            while not stop.is_set():
                revision = LEGACY_VERSIONS[sessions % len(LEGACY_VERSIONS)]
                sessions += 1
                identifier = next(counter)
                opening = {"jsonrpc": "2.0", "id": identifier, "method": "initialize", "params": {
                    "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}}
                body = json.dumps(opening).encode()
                response = connection.exchange(opening, body, legacy_head(target, body))
                answer = _json_answer(tally, "http legacy initialize", response, identifier)
                session = response.headers.get("mcp-session-id")
                if answer is None or not session or answer.get("result", {}).get("protocolVersion") != revision:
                    if answer is not None:
                        tally.error("http legacy initialize: no session", f"{session!r} {str(answer)[:200]}")
                    stop.wait(0.5)
                    continue
                note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
                response = connection.exchange(None, note, legacy_head(target, note, session, revision))
                if response.status != 202:
                    tally.error(f"http legacy initialized: HTTP {response.status}",
                                response.body[:200].decode("latin-1"))
                for _ in range(LEGACY_CALLS_PER_SESSION):
                    if stop.is_set():
                        break
                    text = "l" * rng.randrange(1, 2000)
                    identifier = next(counter)
                    message = {"jsonrpc": "2.0", "id": identifier, "method": "tools/call",
                               "params": {"name": "echo", "arguments": {"text": text}}}
                    body = json.dumps(message).encode()
                    started = time.monotonic()
                    response = connection.exchange(message, body, legacy_head(target, body, session, revision))
                    tally.timed("http legacy call (in a session)", started)
                    answer = _json_or_sse_answer(tally, "http legacy call", response, identifier)
                    check_echo(tally, "http legacy call", answer, text)
                    if answer is not None and "resultType" in answer.get("result", {}):  # LEGACY.md §11.2
                        tally.error("http legacy call: a 2026-07-28 field in a legacy result", str(answer)[:200])
                    tally.op("http legacy call (in a session)", len(text))
                    stop.wait(0.002)
                response = connection.exchange(None, b"", legacy_head(target, b"", session, None, "DELETE"))
                if response.status != 204:
                    tally.error(f"http legacy DELETE: HTTP {response.status}", response.body[:200].decode("latin-1"))
                message = {"jsonrpc": "2.0", "id": next(counter), "method": "tools/list"}
                body = json.dumps(message).encode()
                response = connection.exchange(message, body, legacy_head(target, body, session, revision))
                if response.status != 404:
                    tally.error(f"http legacy: an ended session answered HTTP {response.status}",
                                response.body[:200].decode("latin-1"))
                tally.op("http legacy session (initialize, calls, DELETE)")
        finally:
            connection.close()

    def tasks() -> None:
        """A task tool called with the extension declared, tasks/get polled until it is completed; one
        every TASK_EVERY seconds."""
        connection = Connection(target)
        number = 0
        try:
            while not stop.is_set():
                started = time.monotonic()
                number += 1
                identifier = next(counter)
                message = call(identifier, "soak_task", meta=TASKS_META, n=number, ms=300)
                answer = _json_answer(tally, "http task call", connection.exchange(message), identifier)
                created = answer.get("result", {}) if answer is not None else {}
                task_id = created.get("taskId")
                if answer is not None and (created.get("resultType") != "task" or not isinstance(task_id, str)):
                    tally.error("http task call: not a task", str(answer)[:200])
                    task_id = None
                deadline = time.monotonic() + ANSWER_TIMEOUT
                while task_id is not None:
                    time.sleep(0.05)
                    identifier = next(counter)
                    poll = request(identifier, "tasks/get", taskId=task_id, meta=TASKS_META)
                    polled = time.monotonic()
                    response = connection.exchange(poll)  # its Mcp-Name mirrored as for every named method
                    tally.timed("http task poll (tasks/get)", polled)
                    answer = _json_answer(tally, "http task poll", response, identifier)
                    status = answer.get("result", {}).get("status") if answer is not None else None
                    tally.op("http task poll (tasks/get)")
                    if status == "completed":
                        # tasks/get holds the tool's result under "result", as a call's answer does
                        if text_of(answer.get("result", {})) != f"task {number} done":
                            tally.error("http task: wrong result", str(answer)[:300])
                        tally.op("http task (called, polled to completed)")
                        break
                    if status != "working" or time.monotonic() > deadline:
                        tally.error("http task: not completed", f"status {status!r}: {str(answer)[:300]}")
                        break
                stop.wait(max(0.0, TASK_EVERY - (time.monotonic() - started)))
        finally:
            connection.close()

    def ticks() -> None:
        """Every tick_seconds, `tick`: each held listen stream must hear notifications/resources/updated."""
        assert held is not None
        connection = Connection(target)
        try:
            while not stop.is_set():
                sent = time.monotonic()
                entry: list[Optional[float]] = [sent, None]
                with held.lock:
                    held.ticks.append(entry)
                identifier = next(counter)
                response = connection.exchange(call(identifier, "tick"))
                tally.timed("http tick (published to every listen stream)", sent)
                answer = _json_answer(tally, "http tick", response, identifier)
                if answer is not None:
                    entry[1] = time.monotonic()
                    if not text_of(answer).startswith("tick "):
                        tally.error("http tick: wrong answer", str(answer)[:200])
                tally.op("http tick (a resource update for the listen streams)")
                stop.wait(tick_seconds)
        finally:
            connection.close()

    workloads = [small, small, payloads, slow_clients, hang_ups, progress_streams, malformed, slowloris, slowloris]
    if legacy_sessions:
        workloads.append(legacy)
    if task_calls:
        workloads.append(tasks)
    if held is not None and held.listeners:
        workloads.append(ticks)
    return [guarded(f"http {w.__name__}", w) for w in workloads]


# ---------------------------------------------------------------------------------------------
# HTTP: connections held open beside the load (subscriptions/listen streams, slow heads and bodies).
# Each kind is driven by one client thread over a selector, so a thousand of them cost the soak two
# threads; on the server they must cost no thread either (the event loop holds them).

LISTEN_PER_ADDRESS = 20  # streams per loopback source address: under the server's per-peer bound (32)
LISTEN_FIRST_ADDRESS = 20  # 127.0.0.20 on, as in bench/waiting_clients.py; the normal load uses 127.0.0.1
OPEN_PER_ROUND = 25  # connections (re)opened per round of a holder's loop, so reading never waits long
HELD_GRACE = 5.0  # seconds past its deadline a slow connection may stay open (as for slowloris)
DELIVERY_GRACE = 2.0  # seconds the listeners keep reading after the load stops: the last ticks arrive
TICK_URI = "soak://tick"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


class SseReader:
    """One SSE response read as it arrives, without blocking: the head, the chunks, then the frames."""

    def __init__(self) -> None:
        self.raw = bytearray()
        self.body = bytearray()
        self.status: Optional[int] = None
        self.chunked = False
        self.ended = False  # the last chunk came

    def feed(self, data: bytes) -> list[Any]:
        self.raw += data
        if self.status is None:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return []
            head = bytes(self.raw[:end]).decode("latin-1").lower()
            del self.raw[:end + 4]
            self.status = int(head.split(" ", 2)[1]) if head.startswith("http/1.") else 0
            self.chunked = "transfer-encoding: chunked" in head and "content-type: text/event-stream" in head
            if self.status != 200 or not self.chunked:
                return []
        while not self.ended:
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                break
            size = int(bytes(self.raw[:line_end]).split(b";")[0], 16)
            if len(self.raw) < line_end + 2 + size + 2:
                break
            self.body += self.raw[line_end + 2:line_end + 2 + size]
            del self.raw[:line_end + 2 + size + 2]
            self.ended = size == 0
        frames = []
        while True:
            end = self.body.find(b"\n\n")
            if end < 0:
                return frames
            event = bytes(self.body[:end])
            del self.body[:end + 2]
            frames += [json.loads(line[5:]) for line in event.split(b"\n") if line.startswith(b"data:")]


class _Listen:
    __slots__ = ("acked_at", "deliveries", "id", "reader", "sent_at", "sock")

    def __init__(self, sock: socket.socket, identifier: str, sent_at: float):
        self.sock, self.id, self.sent_at = sock, identifier, sent_at
        self.reader = SseReader()
        self.acked_at: Optional[float] = None
        self.deliveries = 0


class _Slow:
    __slots__ = ("answer", "kind", "next_send", "sock", "started")

    def __init__(self, sock: socket.socket, kind: str, started: float):
        self.sock, self.kind, self.started = sock, kind, started
        self.next_send = started + 1.0
        self.answer = bytearray()


class Held:
    """The held connections, over the whole run: N listen streams and N slow connections kept open (each
    renewed when it ends), the ticks that make the streams carry notifications, and what was counted."""

    def __init__(self, target: HttpTarget, tally: Tally, listeners: int, slow: int, header_timeout: float,
                 read_timeout: float):
        self.target, self.tally = target, tally
        self.listeners, self.slow = listeners, slow
        self.deadlines = {"head": header_timeout, "body": read_timeout}
        self.addresses = max(1, -(-listeners // LISTEN_PER_ADDRESS))
        self.lock = threading.Lock()
        self.ticks: list[list[Optional[float]]] = []  # [sent, answered or None], as the tick load sends them
        self.listening = 0  # streams acknowledged and open now (sampled)
        self.slow_open = 0  # slow connections open now (sampled)
        self.counter = 0
        self.figures: collections.Counter[str] = collections.Counter()
        self.closed_after: dict[str, list[float]] = {"head": [], "body": []}  # seconds open, when at the deadline

    def count(self, figure: str, n: int = 1) -> None:
        with self.lock:
            self.figures[figure] += n

    def workloads(self, stop: threading.Event) -> list[Callable[[], None]]:
        works: list[Callable[[], None]] = []
        if self.listeners:
            works.append(lambda: self.hold_listeners(stop))
        if self.slow:
            works.append(lambda: self.hold_slow(stop))
        return works

    # -- listen streams ------------------------------------------------------------------------------------

    def _open_listen(self) -> Optional[_Listen]:
        with self.lock:
            self.counter += 1
            number = self.counter
        identifier = f"listen-{number}"
        source = f"127.0.0.{LISTEN_FIRST_ADDRESS + number % self.addresses}"
        message = request(identifier, "subscriptions/listen", notifications={"resourceSubscriptions": [TICK_URI]})
        body = json.dumps(message).encode()
        try:
            sock = socket.create_connection((self.target.host, self.target.port), timeout=10,
                                            source_address=(source, 0))
            sock.sendall(self.target.head(message, body) + body)
        except OSError as exc:
            self.tally.error("http listen: cannot open", f"from {source}: {exc}")
            return None
        sock.setblocking(False)
        self.count("listen streams opened")
        return _Listen(sock, identifier, time.monotonic())

    def hold_listeners(self, stop: threading.Event) -> None:
        selector = selectors.DefaultSelector()
        streams: dict[int, _Listen] = {}
        stopped_at: Optional[float] = None

        def end(stream: _Listen, why: Optional[str], stopped_at: float = 0.0) -> None:
            selector.unregister(stream.sock)
            del streams[stream.sock.fileno()]
            if stream.acked_at is not None:
                with self.lock:
                    self.listening -= 1
            stream.sock.close()
            if why is not None:  # the server ended it, or it broke: its deliveries are not judged
                self.tally.error(f"http listen: {why}", f"{stream.id}: {bytes(stream.reader.raw[:200])!r}")
                return
            self.judge(stream, stopped_at)

        while True:
            now = time.monotonic()
            if stopped_at is None and stop.is_set():
                stopped_at = now
            if stopped_at is None:
                for _ in range(min(OPEN_PER_ROUND, self.listeners - len(streams))):
                    stream = self._open_listen()
                    if stream is None:
                        stop.wait(0.5)
                        break
                    streams[stream.sock.fileno()] = stream
                    selector.register(stream.sock, selectors.EVENT_READ, stream)
            elif now - stopped_at > DELIVERY_GRACE:
                break
            for key, _ in selector.select(0.2):
                stream = key.data
                try:
                    data = stream.sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    end(stream, f"the stream broke ({exc})")
                    continue
                if not data:
                    end(stream, "the server ended the stream")
                    continue
                try:
                    frames = stream.reader.feed(data)
                except ValueError as exc:
                    end(stream, f"a malformed stream ({exc})")
                    continue
                if stream.reader.status is not None and (stream.reader.status != 200 or not stream.reader.chunked):
                    end(stream, f"answered HTTP {stream.reader.status}, not an SSE stream")
                    continue
                for frame in frames:
                    self.frame(stream, frame)
            for stream in [s for s in streams.values() if s.acked_at is None and now - s.sent_at > ANSWER_TIMEOUT]:
                end(stream, f"no acknowledgement in {ANSWER_TIMEOUT:g} s")
        for stream in list(streams.values()):
            end(stream, None, stopped_at or time.monotonic())
        selector.close()

    def frame(self, stream: _Listen, frame: Any) -> None:
        params = frame.get("params", {}) if isinstance(frame, dict) else {}
        method = frame.get("method") if isinstance(frame, dict) else None
        if params.get("_meta", {}).get(SUBSCRIPTION) != stream.id:
            self.tally.error("http listen: a frame for another subscription", f"{stream.id}: {str(frame)[:200]}")
        elif method == "notifications/subscriptions/acknowledged" and stream.acked_at is None:
            if params.get("notifications") != {"resourceSubscriptions": [TICK_URI]}:
                self.tally.error("http listen: wrong acknowledgement", str(frame)[:200])
            stream.acked_at = time.monotonic()
            with self.lock:
                self.listening += 1
            self.tally.op("http listen stream held")
        elif method == "notifications/resources/updated" and stream.acked_at is not None \
                and params.get("uri") == TICK_URI:
            stream.deliveries += 1
        else:
            self.tally.error("http listen: an unexpected frame", f"{stream.id}: {str(frame)[:200]}")

    def judge(self, stream: _Listen, cutoff: float) -> None:
        """Every tick sent after the acknowledgement and answered before the load stopped (`cutoff`) must
        have arrived, and none answered before the listen request was sent (the server cannot have
        published it to this stream)."""
        if stream.acked_at is None:
            return
        with self.lock:
            ticks = list(self.ticks)
        must = sum(1 for sent, answered in ticks if answered is not None and sent is not None
                   and sent >= stream.acked_at and answered <= cutoff)
        may = sum(1 for _, answered in ticks if answered is None or answered >= stream.sent_at)
        self.count("notifications delivered", stream.deliveries)
        self.count("notifications that had to arrive", must)
        self.count("streams judged")
        self.tally.op("http listen notification", stream.deliveries)
        if not must <= stream.deliveries <= may:
            self.tally.error("http listen: wrong number of notifications",
                             f"{stream.id}: {stream.deliveries} delivered, {must} to {may} expected")

    # -- slow connections ------------------------------------------------------------------------------

    def _open_slow(self, kind: str) -> Optional[_Slow]:
        try:
            sock = self.target.connect(timeout=10)
            if kind == "head":  # a head that never ends: 408 at the head deadline
                sock.sendall(f"POST {self.target.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())
            else:  # a whole head, screened and accepted, then a body that never ends: closed at the read timeout
                message = call(f"slow-{kind}", "echo", text="b" * 1000)
                sock.sendall(self.target.head(message, json.dumps(message).encode()) + b'{"jsonrpc"')
        except OSError as exc:
            self.tally.error("http held slow connection: cannot open", str(exc))
            return None
        sock.setblocking(False)
        with self.lock:
            self.slow_open += 1
            self.figures[f"slow {kind}: opened"] += 1
        return _Slow(sock, kind, time.monotonic())

    def hold_slow(self, stop: threading.Event) -> None:
        selector = selectors.DefaultSelector()
        held: dict[int, _Slow] = {}
        kinds = {"head": 0, "body": 0}

        def dropped(conn: _Slow, now: float, by_us: bool = False) -> None:
            selector.unregister(conn.sock)
            del held[conn.sock.fileno()]
            kinds[conn.kind] -= 1
            conn.sock.close()
            with self.lock:
                self.slow_open -= 1
            if by_us:
                return
            elapsed, deadline = now - conn.started, self.deadlines[conn.kind]
            status = bytes(conn.answer[:12])
            if elapsed > deadline + HELD_GRACE:
                self.tally.error(f"http held slow {conn.kind}: open past its deadline",
                                 f"{elapsed:.1f} s (deadline {deadline:g} s)")
            elif elapsed < deadline - 1:  # a newcomer took its place at the connection limit, as designed
                self.count(f"slow {conn.kind}: closed early ({status.decode('latin-1') or 'no answer'})")
            elif conn.kind == "head" and status != b"HTTP/1.1 408":
                self.tally.error("http held slow head: not 408 at the deadline", repr(bytes(conn.answer[:200])))
            else:
                self.count(f"slow {conn.kind}: dropped at its deadline")
                with self.lock:
                    self.closed_after[conn.kind].append(elapsed)
                self.tally.op(f"http held slow {conn.kind} (dropped at the {deadline:g} s deadline)")

        while not stop.is_set():
            now = time.monotonic()
            for _ in range(min(OPEN_PER_ROUND, self.slow - len(held))):
                kind = "head" if kinds["head"] <= kinds["body"] else "body"
                conn = self._open_slow(kind)
                if conn is None:
                    stop.wait(0.5)
                    break
                kinds[kind] += 1
                held[conn.sock.fileno()] = conn
                selector.register(conn.sock, selectors.EVENT_READ, conn)
            due = min((c.next_send for c in held.values()), default=now + 0.2)
            for key, _ in selector.select(max(0.0, min(0.2, due - time.monotonic()))):
                conn = key.data
                try:
                    data = conn.sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    conn.answer += data
                else:
                    dropped(conn, time.monotonic())
            now = time.monotonic()
            for conn in [c for c in held.values() if c.next_send <= now]:
                if now - conn.started > self.deadlines[conn.kind] + HELD_GRACE:
                    dropped(conn, now)  # reported as open past its deadline
                    continue
                try:
                    conn.sock.send(b"a" if conn.kind == "head" else b" ")  # a byte a second
                    conn.next_send = now + 1.0
                except BlockingIOError:
                    conn.next_send = now + 1.0
                except OSError:  # the server closed it: its answer (or EOF) is read next round
                    conn.next_send = float("inf")
        for conn in list(held.values()):
            dropped(conn, time.monotonic(), by_us=True)
        selector.close()


def malformed_generator() -> fuzz_gen.Generator:
    """The fuzzer's messages for this server, without the tools that run long or return megabytes on
    request (count, countdown, big), nor those the soak counts (tick: deliveries to the listen streams;
    soak_task: each task is kept an hour, and an owner may hold 1,000): the load keeps its own measure."""
    target = fuzz_gen.Target.of(_soak_module().server, exclude=("count", "countdown", "big", "tick", "soak_task"))
    return fuzz_gen.Generator(target, large=0, repetitive_sizes=(1000, 4000))


def _soak_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("soak_server", TARGET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# The run


class Soak:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tally = Tally()
        self.samples: list[dict[str, Any]] = []
        self.pauses: dict[str, dict[str, dict[str, float]]] = {}
        self.started = time.monotonic()
        argv = [sys.executable, "-m", "mcpserver", TARGET]
        self.stdio = Process("stdio", argv, subprocess.PIPE)
        self.http = Process("http", [*argv[:-1], "--http", "--port", "0", "--log-level", "warning", TARGET],
                            subprocess.DEVNULL)
        for server in (self.stdio, self.http):
            if not server.ready.wait(30):
                raise RuntimeError(f"{server.name} server did not start: {''.join(server.stderr)}")
        self.stdio_client = StdioClient(self.stdio, self.tally)
        self.http_target = HttpTarget(self.http)
        self.held = Held(self.http_target, self.tally, args.hold_listeners, args.hold_slow, DEFAULT_HEADER_TIMEOUT,
                         DEFAULT_READ_TIMEOUT)

    def sampler(self, stop: threading.Event, phase: list[str]) -> None:
        while not stop.is_set():
            now = time.monotonic() - self.started
            load = os.getloadavg()[0]
            for server in (self.stdio, self.http):
                if server.process.poll() is None:
                    held = {"listening": self.held.listening, "slow": self.held.slow_open} if server is self.http \
                        else {}
                    self.samples.append({"t": round(now, 1), "phase": phase[0], "server": server.name,
                                         "load1": load, **server.sample(), **held})
            stop.wait(self.args.sample_seconds)

    def load(self, seconds: float, phase: str) -> None:
        stop = threading.Event()
        args = self.args
        threads = [threading.Thread(target=work, daemon=True, name=f"{phase}-{i}") for i, work in enumerate(
            stdio_workloads(self.stdio_client, self.tally, stop, args.seed, args.cancel)
            + http_workloads(self.http_target, self.tally, stop, args.seed, args.cancel, self.held, args.tick_seconds,
                             args.legacy, args.tasks)
            + [self._reported(work) for work in self.held.workloads(stop)])]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            for server in (self.stdio, self.http):
                if server.process.poll() is not None:
                    self.tally.error(f"{server.name}: server died", "".join(server.stderr[-20:]))
                    deadline = 0
            print(f"soak: {phase} {time.monotonic() - self.started:.0f} s, {sum(self.tally.ops.values()):,} "
                  f"operations, {sum(self.tally.errors.values())} errors", flush=True)
        stop.set()
        for thread in threads:
            thread.join(ANSWER_TIMEOUT + HEADER_TIMEOUT)

    def _reported(self, work: Callable[[], None]) -> Callable[[], None]:
        """A holder thread that fails (a bug of the soak's own) is an error, not a thread quietly gone."""
        def run() -> None:
            try:
                work()
            except Exception as exc:  # anything: reported with its traceback
                import traceback

                self.tally.error(f"soak holder: {type(exc).__name__}", traceback.format_exc())
        return run

    def pause(self, name: str) -> None:
        """Wait for the servers to settle with no client left, then count."""
        time.sleep(self.args.settle_seconds)
        self.pauses[name] = {server.name: server.sample() for server in (self.stdio, self.http)}

    def finish(self) -> dict[str, Any]:
        for server in (self.stdio, self.http):
            for finding in server.faults():
                label = fuzz_known.known(finding.signature)
                if label:  # an open bug the fuzzer found: reported, and counted apart
                    self.tally.op(f"known open bug on {server.name}'s stderr: {label}")
                else:
                    self.tally.error(f"{server.name}: {finding.signature}", finding.detail[-500:])
        exits = {}
        assert self.stdio.process.stdin is not None
        for server in (self.stdio, self.http):
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            try:
                code = server.process.wait(30)
            except subprocess.TimeoutExpired:
                server.process.kill()
                code = server.process.wait()
                self.tally.error(f"{server.name}: did not exit on SIGTERM", "killed after 30 s")
            exits[server.name] = {"status": code, "seconds": round(time.monotonic() - started, 2)}
            if code != 0:
                self.tally.error(f"{server.name}: exit status {code} on SIGTERM", "".join(server.stderr[-10:]))
        client = self.stdio_client
        if client.idless_received != client.idless_expected:
            self.tally.error("stdio: id-less answers", f"{client.idless_received} received for "
                                                       f"{client.idless_expected} malformed lines that need one")
        return exits


def verdict(samples: list[dict[str, Any]], pauses: dict[str, dict[str, dict[str, float]]], server: str,
            warm: float, held: bool = False) -> dict[str, Any]:
    mine = [s for s in samples if s["server"] == server and s["phase"] == "main" and s["t"] >= warm]
    third = max(1, len(mine) // 3)
    first = statistics.median(s["rss_mib"] for s in mine[:third]) if mine else 0.0
    last = statistics.median(s["rss_mib"] for s in mine[-third:]) if mine else 0.0
    start, end = pauses["after warm-up"][server], pauses["end"][server]
    # The HTTP server's pool keeps a worker for 60 s idle (--worker-idle-seconds), longer than a short pause: its
    # threads at rest may stand at the highest concurrency of the last minute, which is no leak; past the bound is.
    threads = start["threads"] if server == "stdio" else max(start["threads"], DEFAULT_MAX_REQUESTS + THREAD_SLACK)
    checks = {
        "threads": end["threads"] <= threads,
        "open files": end["fds"] <= start["fds"],
        "zombies": end["zombies"] == 0,
        "RSS at rest": end["rss_mib"] <= start["rss_mib"] * 1.10 + 8,
        "RSS under load": last <= first * 1.10 + 8,
    }
    if held:  # the connections held cost no thread: the workers' bound holds, a thousand connections or not
        most = max((s["threads"] for s in mine), default=0)
        checks["threads under load"] = most <= DEFAULT_MAX_REQUESTS + THREAD_SLACK
    return {"start": start, "end": end, "load_rss_first_third": first, "load_rss_last_third": last,
            "max": {k: max((s[k] for s in mine), default=0) for k in ("rss_mib", "threads", "fds", "children")},
            "checks": checks, "flat": all(checks.values())}


def render(result: dict[str, Any]) -> str:
    lines = [MARK_START, "## Soak (`make soak`)", "",
             f"Run on {result['date']} for {result['minutes']:g} minutes (warm-up {result['warm_seconds']:.0f} s), "
             f"mcpserver at commit {result['commit']}, Python {result['python']}, 1-minute load average "
             f"{result['load_before']:.1f} before and {result['load_after']:.1f} after. "
             "Regenerate with `make soak` (`SOAK_MINUTES=`); the rule and the load are in `bench/soak.py`.", "",
             f"**Verdict: {'pass' if result['pass'] else 'FAIL'}**: {result['errors_total']} errors; "
             + (f"{sum(o['recovered'] for o in result['faults']['outcomes'])} of "
                f"{len(result['faults']['outcomes'])} faults recovered; " if result.get("faults") else "")
             + "; ".join(f"{name} {'flat' if v['flat'] else 'NOT flat'}"
                         + "".join(f" ({check} failed)" for check, ok in v["checks"].items() if not ok)
                         for name, v in result["servers"].items())
             + ".", "",
             "| Server | RSS MiB after warm-up → end | threads | open files | zombies at end | max under load "
             "(RSS MiB / threads / fds) | load RSS median, first → last third |",
             "|---|---|---|---|---|---|---|"]
    for name, v in result["servers"].items():
        s, e, m = v["start"], v["end"], v["max"]
        lines.append(f"| {name} | {s['rss_mib']:.1f} → {e['rss_mib']:.1f} | {s['threads']} → {e['threads']} | "
                     f"{s['fds']} → {e['fds']} | {e['zombies']} | {m['rss_mib']:.1f} / {m['threads']} / {m['fds']} | "
                     f"{v['load_rss_first_third']:.1f} → {v['load_rss_last_third']:.1f} |")
    lines += ["", "RSS in MiB, median of each minute's samples (warm-up first):", ""]
    for name in result["servers"]:
        minutes: dict[int, list[float]] = {}
        for sample in result["samples"]:
            if sample["server"] == name:
                minutes.setdefault(int(sample["t"] // 60), []).append(sample["rss_mib"])
        lines.append(f"- {name}: " + ", ".join(f"{statistics.median(v):.1f}" for _, v in sorted(minutes.items())))
    lines += render_held(result)
    lines += render_faults(result)
    if result.get("latency_ms"):
        lines += ["", "Latency of quick calls during the main phase, in ms (the client's clock: send to whole answer, "
                  "on a machine shared with the load's own clients):", "",
                  "| Call | n | median | p90 | p99 | max |", "|---|---|---|---|---|---|"]
        lines += [f"| {kind} | {v['n']:,} | {v['p50']:.1f} | {v['p90']:.1f} | {v['p99']:.1f} | {v['max']:.0f} |"
                  for kind, v in sorted(result["latency_ms"].items())]
    lines += ["", "What ran (operations completed, all checked):", ""]
    for kind, count in sorted(result["ops"].items()):
        size = result["bytes"].get(kind, 0)
        lines.append(f"- {kind}: {count:,}" + (f" ({size / MIB:,.0f} MiB)" if size > MIB else ""))
    lines += ["", "The rule: 0 errors (a wrong, missing or late answer; an answer after a cancel; a 5xx for "
              "a malformed request; a traceback on stderr; a slowloris connection alive past the head deadline "
              "plus 5 s; an exit status other than 0 on SIGTERM), and flat after warm-up: at the pause after "
              f"warm-up and at the end (no client connected, {result.get('settle_seconds', 3):g} s to settle) threads "
              f"and open files must not grow (the HTTP server's threads may, to its {DEFAULT_MAX_REQUESTS} workers + "
              f"{THREAD_SLACK}: its pool retires a worker only after 60 s idle), no zombie child may remain, RSS "
              "must stay within 10% + 8 MiB; under "
              "load, the median RSS of the last third of the samples must stay within 10% + 8 MiB of the first "
              "third's. With connections held: "
              "every listen stream hears each update published while it was acknowledged and none from before "
              "it asked, and none ends, breaks or is refused; a slow connection is closed by its deadline "
              "(the head timeout, with 408, for a head; the read timeout for a body) plus 5 s; the HTTP server's "
              "threads under load stay within that bound too: held connections cost no thread."]
    if result["errors_total"]:
        lines += ["", "Errors:", ""] + [f"- {k}: {v} (e.g. {result['examples'][k][:200]!r})"
                                        for k, v in result["errors"].items()]
    if result.get("note"):
        lines += ["", result["note"]]
    lines += ["", "SIGTERM at the end: " + ", ".join(f"{k} exit {v['status']} in {v['seconds']} s"
                                                     for k, v in result["exits"].items()) + ".", MARK_END]
    return "\n".join(lines) + "\n"


def render_held(result: dict[str, Any]) -> list[str]:
    """The held connections' paragraph: how many were open under load, and what became of them."""
    held = result.get("held")
    if not held or not (held["listeners"] or held["slow"]):
        return []
    figures, deadlines = held["figures"], held.get("deadlines", {})
    main = [s for s in result["samples"] if s["server"] == "http" and s["phase"] == "main" and "listening" in s]

    def spread(key: str) -> str:
        values = sorted(s[key] for s in main)
        return f"{values[0]}, {statistics.median(values):g}, {values[-1]}" if values else "no sample"

    lines = ["", f"Held on the HTTP server beside the load, each renewed when it ended: {held['listeners']} "
             f"subscriptions/listen streams (from {held['addresses']} loopback addresses) and {held['slow']} slow "
             "connections (half with a request head trickling a byte a second, half with a whole head and a body "
             "trickling). Open under load (fewest, median, most of the samples): listen streams "
             f"{spread('listening')}; slow connections {spread('slow')}.", ""]
    if held["listeners"]:
        lines.append(f"- Listen streams: {figures.get('listen streams opened', 0):,} opened, "
                     f"{figures.get('streams judged', 0):,} judged when closed; {held['ticks']:,} updates published "
                     f"(one every {held['tick_seconds']:g} s), {figures.get('notifications delivered', 0):,} "
                     f"notifications delivered of {figures.get('notifications that had to arrive', 0):,} that had "
                     "to arrive.")
    for kind, label, why in (("head", "heads", "head timeout, 408"), ("body", "bodies", "read timeout")):
        opened = figures.get(f"slow {kind}: opened", 0)
        if not opened:
            continue
        after = held.get("closed_after", {}).get(kind)
        early = {k.split("closed early ", 1)[1]: v for k, v in figures.items()
                 if k.startswith(f"slow {kind}: closed early")}
        lines.append(f"- Slow {label}: {opened:,} opened, {figures.get(f'slow {kind}: dropped at its deadline', 0):,} "
                     f"closed by the server at its {deadlines.get(kind, 0):g} s deadline ({why})"
                     + (f", after {after[0]:.1f} to {after[1]:.1f} s" if after else "")
                     + (", " + ", ".join(f"{v:,} closed early {k}" for k, v in sorted(early.items()))
                        + " (a newcomer takes the place of the longest waiting at the connection limit)"
                        if early else "")
                     + "; the rest were open when the load stopped.")
    return lines


def render_faults(result: dict[str, Any]) -> list[str]:
    """The faults' paragraph (--faults): how many of each kind were injected and recovered, and the ones not."""
    faults = result.get("faults")
    if not faults:
        return []
    outcomes = faults["outcomes"]
    kinds: dict[str, list[dict[str, Any]]] = {}
    for outcome in outcomes:
        kinds.setdefault(outcome["kind"], []).append(outcome)
    recovered = sum(outcome["recovered"] for outcome in outcomes)
    lines = ["", f"Faults injected beside the load (`--faults`, one every {faults['every']:g} s on average, "
             f"bench/soak_faults.py): {len(outcomes)}, {recovered} recovered.", "",
             "| Fault | injected | recovered | longest check (s) |", "|---|---|---|---|"]
    for kind, seen in sorted(kinds.items()):
        lines.append(f"| {kind} | {len(seen)} | {sum(o['recovered'] for o in seen)} | "
                     f"{max(o['seconds'] for o in seen):.1f} |")
    failed = [outcome for outcome in outcomes if not outcome["recovered"]]
    if failed:
        lines += ["", "Not recovered:", ""] + [f"- at {o['at']:.0f} s, {o['kind']}: {o['detail'][:300]}"
                                               for o in failed[:20]]
    if faults.get("unavailable"):
        lines += ["", "Not injectable on this machine: " + ", ".join(faults["unavailable"]) + "."]
    return lines


def write_doc(section: str, path: str = DOC) -> None:
    text = "# Performance\n"
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            text = file.read()
    if MARK_START in text and MARK_END in text:
        before, rest = text.split(MARK_START, 1)
        text = before + section.rstrip("\n") + rest.split(MARK_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--settle-seconds", type=float, default=TRIM_SECONDS + 2.0,
                        help="at each pause, with no client left, before counting (default: one trim and 2 s)")
    parser.add_argument("--cancel", action=argparse.BooleanOptionalAction, default=True,
                        help="cancel calls in flight (notifications/cancelled on stdio, a closed stream over HTTP)")
    parser.add_argument("--hold-listeners", type=int, default=500, metavar="N",
                        help="subscriptions/listen streams held open on the HTTP server beside the load, from "
                             f"127.0.0.{LISTEN_FIRST_ADDRESS} on, {LISTEN_PER_ADDRESS} per address (default 500; "
                             "0: none)")
    parser.add_argument("--hold-slow", type=int, default=500, metavar="N",
                        help="slow connections held open beside the load, half trickling a head and half a body, "
                             "each renewed when the server drops it at its deadline (default 500; 0: none)")
    parser.add_argument("--tick-seconds", type=float, default=2.0,
                        help="how often a resource update is sent to the held listen streams (default 2)")
    parser.add_argument("--legacy", action=argparse.BooleanOptionalAction, default=True,
                        help="a legacy-era HTTP client in the load: initialize, calls with Mcp-Session-Id, DELETE")
    parser.add_argument("--tasks", action=argparse.BooleanOptionalAction, default=True,
                        help="task calls in the HTTP load (the extension declared, tasks/get polled to completion)")
    parser.add_argument("--faults", action="store_true",
                        help="inject issue 50's faults at random beside the load (bench/soak_faults.py); each must "
                             "recover (make soak SOAK_FAULTS=1)")
    parser.add_argument("--fault-every", type=float, default=60.0, metavar="SECONDS",
                        help="with --faults: one fault this often on average (default 60)")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/reports/performance.md")
    parser.add_argument("--render", metavar="RESULTS", help="only rewrite the doc's section from a results file")
    parser.add_argument("--note", help="with --render: a paragraph of analysis to keep with the figures")
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render, encoding="utf-8") as file:
            result = json.load(file)
        if args.note:
            result["note"] = args.note
            with open(args.render, "w", encoding="utf-8") as file:
                json.dump(result, file, indent=1)
        write_doc(render(result))
        return 0
    total = args.minutes * 60
    warm = max(30.0, total * 0.1) if total >= 60 else total * 0.2
    load_before = os.getloadavg()[0]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # so that atexit runs
    soak = Soak(args)
    phase = ["warm-up"]
    stop_sampling = threading.Event()
    sampler = threading.Thread(target=soak.sampler, args=(stop_sampling, phase), daemon=True)
    sampler.start()
    print(f"soak: {args.minutes:g} minutes, warm-up {warm:.0f} s, stdio pid {soak.stdio.process.pid}, "
          f"http pid {soak.http.process.pid}, cancels {'on' if args.cancel else 'off'}, holding "
          f"{args.hold_listeners} listen streams and {args.hold_slow} slow connections", flush=True)
    soak.load(warm, "warm-up")
    soak.pause("after warm-up")
    phase[0] = "main"
    with soak.tally.lock:  # the main phase's: the warm-up's include the first thousand held connections opening
        soak.tally.latencies.clear()
    faults = None
    if args.faults:
        from soak_faults import Faults

        faults = Faults(args.fault_every, args.seed, soak.started)
        faults.start()
    soak.load(total - warm, "main")
    injected = faults.finish() if faults is not None else []
    soak.pause("end")
    stop_sampling.set()
    sampler.join()
    exits = soak.finish()
    holding = bool(args.hold_listeners or args.hold_slow)
    servers = {name: verdict(soak.samples, soak.pauses, name, warm, holding and name == "http")
               for name in ("stdio", "http")}
    errors_total = sum(soak.tally.errors.values())
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "minutes": args.minutes, "warm_seconds": warm, "commit": _commit(), "python": platform.python_version(),
        "load_before": load_before, "load_after": os.getloadavg()[0], "cancel": args.cancel,
        "ops": dict(soak.tally.ops), "bytes": dict(soak.tally.bytes), "errors": dict(soak.tally.errors),
        "examples": soak.tally.examples, "errors_total": errors_total, "servers": servers, "exits": exits,
        "samples": soak.samples,
        "pass": errors_total == 0 and all(v["flat"] for v in servers.values())
        and all(outcome["recovered"] for outcome in injected),
        "faults": {"outcomes": injected, "every": args.fault_every,
                   "unavailable": faults.unavailable() if faults is not None else []} if args.faults else None,
        "held": {"listeners": args.hold_listeners, "slow": args.hold_slow, "addresses": soak.held.addresses,
                 "tick_seconds": args.tick_seconds, "ticks": len(soak.held.ticks), "figures": dict(soak.held.figures),
                 "deadlines": soak.held.deadlines,
                 "closed_after": {k: [min(v), max(v)] for k, v in soak.held.closed_after.items() if v}},
        "latency_ms": soak.tally.latency_summary(),
        "legacy": args.legacy, "tasks": args.tasks, "settle_seconds": args.settle_seconds,
    }
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "soak-latest.json"), "w", encoding="utf-8") as file:
        json.dump(result, file, indent=1)
    section = render(result)
    print(section)
    if not args.no_doc:
        write_doc(section)
        print(f"soak: wrote {os.path.relpath(DOC, ROOT)}")
    return 0 if result["pass"] else 1


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
