"""Drivers that put one fuzzed message through the server and judge what came back.

- `Core`: protocol.parse and dispatch in this process (stdio semantics without headers, HTTP semantics with
  them), the log captured per message.
- `LiveStdio`: `python -m mcpserver TARGET` on real pipes. After the answers a message needs (paired by
  id: calls run concurrently and answer in completion order), a `mark` request follows; whatever comes
  before the mark's answer also belongs to the message, and the stderr before the mark's line is what
  the server logged for it.
- `LiveHttp`: `python -m mcpserver --http --port 0 TARGET` over raw keep-alive sockets (so duplicate
  headers and broken framing can be sent), a mark request after each message the same way.

Every driver returns a list of `Finding`s for a message (empty when all is well). Time is judged
against a linear reference measured in the same run (`Budget`), never a fixed number of milliseconds.
"""

from __future__ import annotations

import cProfile
import io
import json
import logging
import os
import pstats
import queue
import random
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Callable, NamedTuple, Optional

import fuzz_check
import fuzz_gen
from fuzz_check import ABSENT, Expected
from mcpserver import protocol

HERE = os.path.dirname(os.path.abspath(__file__))
FUZZ_SERVER = os.path.join(HERE, "fuzz_server.py")
META = {fuzz_gen.META_VERSION: fuzz_gen.VERSION, fuzz_gen.META_CAPABILITIES: {}}


class Finding(NamedTuple):
    kind: str  # exception, internal-error, traceback, tool-crash, bad-answer, no-answer, extra-answer, status,
    #           schema, slow, crash, hang, smuggling, transport
    where: str  # what failed, stable across occurrences (the dedup key with `kind`)
    detail: str  # this occurrence

    @property
    def signature(self) -> str:
        return f"{self.kind}: {self.where}"


def _normalise(text: str) -> str:
    """A detail reduced to its shape: quoted values and numbers blanked, so occurrences group together."""
    return re.sub(r"'[^']*'|\"[^\"]*\"|-?\d+(\.\d+)?", "_", text)[:120]


def _ours(filename: str) -> bool:
    return f"{os.sep}mcpserver{os.sep}" in filename


def _shown(frames: list[tuple[str, str]]) -> str:
    """`inner.py:function < outer.py:caller`: the two innermost mcpserver frames (else the innermost frame),
    frames given outermost first."""
    inside = [f for f in frames if _ours(f[0])] or frames[-1:]
    return " < ".join(f"{os.path.basename(path)}:{function}" for path, function in reversed(inside[-2:]))


def _frames_where(name: str, frames: list[tuple[str, str]]) -> str:
    shown = _shown(frames)
    return f"{name} in {shown}" if shown else name


def _where_in_traceback(tb: Any, exc: BaseException) -> str:
    return _frames_where(type(exc).__name__, [(f.filename, f.name) for f in traceback.extract_tb(tb)])


_TB_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def where_in_text(text: str) -> str:
    """`where` of the last traceback printed in a log."""
    block = text[text.rfind("Traceback (most recent call last)"):]
    names = [m.group(1) for m in map(_EXCEPTION_LINE.match, block.splitlines()[1:])
             if m and m.group(1) not in ("Traceback", "During", "The")]
    name = names[-1].rsplit(".", 1)[-1] if names else "?"
    if name == "?":  # interleaved with other output (a dying thread): any exception line will do
        found = re.findall(r"\b(\w+(?:Error|Exception|Interrupt|Exit))\b: ", text)
        name = found[-1] if found else "?"
    return _frames_where(name, _TB_FRAME.findall(block))


class Dumps:
    """Where this process's main thread is while a message runs long, even inside C code that holds the
    GIL (a regex): an interval timer raises SIGALRM every `limit` seconds while a message runs, and
    faulthandler's C-level handler writes the interrupted stack to a file. SIGUSR1 does the same on
    demand (the parent sends it before killing a stuck worker)."""

    def __init__(self, path: str):
        import faulthandler
        import signal

        self.file = open(path, "w+b")  # noqa: SIM115 - open for the whole run
        for signum in (signal.SIGALRM, signal.SIGUSR1):
            faulthandler.register(signum, file=self.file, all_threads=False)

    def arm(self, seconds: float) -> int:
        """Start sampling after `seconds` (and every `seconds` after that); the position to read from."""
        import signal

        signal.setitimer(signal.ITIMER_REAL, seconds, seconds)
        return self.position()

    def disarm(self) -> None:
        import signal

        signal.setitimer(signal.ITIMER_REAL, 0)

    def position(self) -> int:
        return os.lseek(self.file.fileno(), 0, os.SEEK_CUR)

    def where(self, since: int) -> Optional[str]:
        """The two innermost mcpserver functions the main thread was seen in most often since `since`."""
        end = self.position()
        text = os.pread(self.file.fileno(), min(end - since, 1 << 22), since).decode("utf-8", "replace")
        return where_in_dumps(text)

    def close(self) -> None:
        import faulthandler
        import signal

        self.disarm()
        for signum in (signal.SIGALRM, signal.SIGUSR1):
            faulthandler.unregister(signum)
        self.file.close()


def where_in_dumps(text: str) -> Optional[str]:
    seen: dict[str, int] = {}
    for block in text.split("(most recent call first):")[1:]:
        frames = re.findall(r'File "([^"]+)", line \d+ in (\S+)', block.split("\n\n")[0])
        if frames:
            where = _shown(list(reversed(frames)))
            seen[where] = seen.get(where, 0) + 1
    return f"in {max(seen, key=lambda k: seen[k])}" if seen else None


# ---------------------------------------------------------------------------------------------
# Time budgets against a linear reference


def echo_request(size: int, id: Any = "ref") -> bytes:
    return fuzz_gen.to_bytes({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                              "params": {"_meta": META, "name": "echo", "arguments": {"text": "x" * size}}})


class Budget:
    """How long a message of n bytes may take: FACTOR times the linear reference (the cost of echoing
    n bytes, measured on the same server in the same run), plus SLACK for a shared, noisy machine."""

    FACTOR = 25.0

    def __init__(self, slack: float):
        self.slack = slack
        self.fixed = 0.0  # seconds per message
        self.per_byte = 0.0  # seconds per byte

    def calibrate(self, run: Callable[[bytes], float]) -> None:
        def best(size: int) -> float:
            data = echo_request(size)
            return min(run(data) for _ in range(5))

        small = best(10)
        large_size = 1_000_000
        large = best(large_size)
        self.fixed = small
        self.per_byte = max(large - small, 0.0) / large_size

    def reference(self, size: int) -> float:
        return self.fixed + self.per_byte * size

    def limit(self, size: int) -> float:
        return self.FACTOR * self.reference(size) + self.slack

    def describe(self) -> str:
        return (f"linear reference {self.fixed * 1e6:.0f} µs + {self.per_byte * 1e9:.1f} ns/byte; "
                f"budget {self.FACTOR:g}x that + {self.slack:g} s")


# ---------------------------------------------------------------------------------------------
# In-process: the protocol core


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _NullWriter(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


def header_dict(headers: Optional[list[tuple[str, str]]]) -> Optional[dict[str, str]]:
    """The lower-case header map the WSGI app hands the core (repeated headers joined with commas)."""
    if headers is None:
        return None
    mapped: dict[str, str] = {}
    for name, value in headers:
        key = name.lower().replace("_", "-")
        if key in ("content-type", "content-length"):
            continue
        mapped[key] = f"{mapped[key]},{value}" if key in mapped else value
    return mapped


class CoreRun(NamedTuple):
    reply: Optional[protocol.Reply]
    encoded: Optional[bytes]
    elapsed: float
    records: list[logging.LogRecord]
    escaped: Optional[BaseException]


def _core_reply(data: bytes, server: Any, headers: Optional[dict[str, str]]) -> protocol.Reply:
    """What a transport does with the bytes of one message: parse, then dispatch a request. Nothing is
    answered to the rest: here that is a Reply without a response and with HTTP's 202."""
    message = protocol.parse(data, responses=headers is None)
    if isinstance(message, protocol.Refusal):
        return message.reply
    if isinstance(message, protocol.Request):
        return protocol.dispatch(message, server, headers)
    return protocol.Reply(None, protocol.ANSWERED, 202)


class Core:
    """protocol.parse and protocol.dispatch on a Server in this process."""

    name = "core"

    def __init__(self, server: Any, fail_on_purpose: tuple[str, ...] = (), schema: Optional[Any] = None,
                 sample_every: int = 0):
        self.server = server
        self.fail_on_purpose = fail_on_purpose
        self.schema = schema
        self.sample_every = sample_every
        self.sampled = 0
        self.capture = _Capture()
        logger = logging.getLogger("mcpserver")
        logger.addHandler(self.capture)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        self.budget = Budget(slack=0.25)

    def close(self) -> None:
        logging.getLogger("mcpserver").removeHandler(self.capture)
        logging.getLogger("mcpserver").propagate = True

    def run(self, data: bytes, headers: Optional[dict[str, str]]) -> CoreRun:
        self.capture.records = []
        saved = sys.stdout
        sys.stdout = _NullWriter()  # tools that print must not reach the terminal
        escaped: Optional[BaseException] = None
        reply = encoded = None
        started = time.perf_counter()
        try:
            reply = _core_reply(data, self.server, headers)
            if reply.response is not None:
                encoded = protocol.encode(reply.response)
        except BaseException as exc:
            escaped = exc
        finally:
            elapsed = time.perf_counter() - started
            sys.stdout = saved
        return CoreRun(reply, encoded, elapsed, self.capture.records, escaped)

    def timer(self, data: bytes) -> float:
        return self.run(data, None).elapsed

    def check(self, message: fuzz_gen.Message, index: int = 0, dumps: Optional[Dumps] = None) -> list[Finding]:
        headers = header_dict(message.headers)
        since = dumps.arm(self.budget.limit(len(message.data))) if dumps is not None else 0
        try:
            run = self.run(message.data, headers)
        finally:
            if dumps is not None:
                dumps.disarm()
        findings = self.judge(message.data, headers, run)
        size = max(len(message.data), len(run.encoded or b""))
        limit = self.budget.limit(size)
        if run.elapsed > limit and not any(f.kind == "exception" for f in findings):
            best = run.elapsed
            if best < 10 * limit:  # a machine hiccup is possible; ten times over is not one
                best = min(best, *(self.run(message.data, headers).elapsed for _ in range(2)))
            if best > limit:
                where = dumps.where(since) if dumps is not None else None
                if where is None:
                    where = hotspot(lambda: self.run(message.data, headers))
                findings.append(Finding("slow", where, f"{best:.3f} s for {size} bytes; budget {limit:.3f} s"))
        if self.schema is not None and self.sample_every and index % self.sample_every == 0 and run.encoded:
            self.sampled += 1
            expected = fuzz_check.expect(message.data, http=headers is not None)
            problem = self.schema.problem(json.loads(run.encoded), expected.method)
            if problem:
                findings.append(Finding("schema", _normalise(problem), problem))
        return findings

    def judge(self, data: bytes, headers: Optional[dict[str, str]], run: CoreRun) -> list[Finding]:
        findings = [f for f in (log_finding(r, self.fail_on_purpose) for r in run.records) if f]
        if run.escaped is not None:
            exc = run.escaped
            return [Finding("exception", _where_in_traceback(exc.__traceback__, exc), f"{type(exc).__name__}: {exc}"),
                    *findings]
        assert run.reply is not None
        expected = fuzz_check.expect(data, http=headers is not None)
        response = json.loads(run.encoded) if run.encoded is not None else None
        answered = judge_answers(expected, [response] if response is not None else [])
        if any(f.kind == "internal-error" for f in findings):  # the log already says where
            answered = [f for f in answered if f.kind != "internal-error"]
        findings += answered
        if headers is not None and response is not None:
            problem = fuzz_check.check_status(run.reply.http_status, response)
            if problem:
                findings.append(Finding("status", _normalise(problem), problem))
        return findings


def log_finding(record: logging.LogRecord, fail_on_purpose: tuple[str, ...]) -> Optional[Finding]:
    """A log record that shows a fault: a traceback, or an error the server logged about itself."""
    message = record.getMessage()
    if record.name == "mcpserver.tools" and message.startswith("tool "):
        tool = message.split()[1]
        if tool in fail_on_purpose:
            return None
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            return Finding("tool-crash", f"{_where_in_traceback(record.exc_info[2], exc)} (tool {tool})",
                           f"{message}: {exc}")
        return None  # "broke its outputSchema", "returned a value that is not JSON": the tool's own fault, answered
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        kind = "internal-error" if "internal error" in message else "traceback"
        return Finding(kind, _where_in_traceback(record.exc_info[2], exc), f"{message}: {type(exc).__name__}: {exc}")
    if record.levelno >= logging.ERROR:
        return Finding("traceback", _normalise(message), message)
    return None


def judge_answers(expected: Expected, responses: list[Any]) -> list[Finding]:
    if not expected.answered:
        if responses:
            what = "notification" if expected.notification else "client response"
            return [Finding("extra-answer", f"a {what} was answered", json.dumps(responses[0])[:300])]
        return []
    if not responses:
        return [Finding("no-answer", "a request got no answer", f"expected id {expected.id!r}")]
    findings = []
    if len(responses) > 1:
        findings.append(Finding("extra-answer", "one message, several answers", f"{len(responses)} answers"))
    problem = fuzz_check.check_response(responses[0], expected)
    if problem:
        kind = "internal-error" if problem.startswith("internal error") else "bad-answer"
        findings.append(Finding(kind, _normalise(problem), problem))
    return findings


def hotspot(action: Callable[[], Any]) -> str:
    """Where `action` spends its time: of mcpserver's functions on the hot path (at least 80% of the
    heaviest one's cumulative time), the innermost; else the function with the most time of its own."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        action()
    finally:
        profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    ours = [key for key in stats if f"{os.sep}mcpserver{os.sep}" in key[0]]
    if not ours:
        key = max(stats, key=lambda k: stats[k][2])
        return f"in {os.path.basename(key[0])}:{key[2]}"
    heaviest = max(stats[key][3] for key in ours)
    key = min((k for k in ours if stats[k][3] >= 0.8 * heaviest), key=lambda k: stats[k][3])
    frames = [(key[0], key[2])]
    callers = {c: v for c, v in stats[key][4].items() if _ours(c[0]) and c != key}
    if callers:
        caller = max(callers, key=lambda c: callers[c][3])
        frames.insert(0, (caller[0], caller[2]))
    return f"in {_shown(frames)}"


# ---------------------------------------------------------------------------------------------
# Live servers


def server_command(target: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mcpserver", *extra, target]


def mark_request(n: int) -> bytes:
    return fuzz_gen.to_bytes({"jsonrpc": "2.0", "id": f"fuzz-mark-{n}", "method": "tools/call",
                              "params": {"_meta": META, "name": "mark", "arguments": {"n": n}}})


class _Stderr:
    """A server's stderr, collected line by line; waits for the mark lines."""

    def __init__(self, stream: Any):
        self.lines: list[str] = []
        self.deaths = 0  # threads that died with a traceback ("Exception in thread ...")
        self.changed = threading.Condition()
        self.consumed = 0
        self.closed = False
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream: Any) -> None:
        for raw in iter(stream.readline, b""):
            with self.changed:
                self.lines.append(raw.decode("utf-8", "replace"))
                self.deaths += raw.startswith(b"Exception in thread")
                self.changed.notify_all()
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def until(self, marker: str, timeout: float) -> tuple[str, bool]:
        """Everything logged since the last call, up to the line holding `marker`; (text, found)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for i in range(self.consumed, len(self.lines)):
                    if marker in self.lines[i]:
                        text = "".join(self.lines[self.consumed:i])
                        self.consumed = i + 1
                        return text, True
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    text = "".join(self.lines[self.consumed:])
                    self.consumed = len(self.lines)
                    return text, False
                self.changed.wait(remaining)

    def tail(self, count: int = 40) -> str:
        with self.changed:
            return "".join(self.lines[-count:])


_LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (\w+) (\S+): ")
_UNLOGGED = ("Exception in thread", "Exception occurred during processing", "Exception ignored",
             "Fatal Python error")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def log_blocks(text: str) -> list[str]:
    """A server's stderr cut into entries: each log record with its traceback, and each traceback printed
    outside logging (a dying thread, socketserver's handle_error, a bare one)."""
    blocks: list[list[str]] = []
    awaiting = False  # the current entry may still be followed by its traceback
    for line in text.splitlines():
        if _LOG_RECORD.match(line) or line.startswith(_UNLOGGED):
            blocks.append([line])
            awaiting = True
            continue
        if line.startswith("Traceback (most recent call last)") and not awaiting:
            blocks.append([])
        if not blocks:
            blocks.append([])
        blocks[-1].append(line)
        if line.startswith(_CHAINED):
            awaiting = True
        elif line.startswith("Traceback"):
            awaiting = False
    return ["\n".join(block) for block in blocks]


def stderr_findings(text: str, fail_on_purpose: tuple[str, ...]) -> list[Finding]:
    """Tracebacks and errors in what the server logged, except tracebacks of tools that fail on purpose."""
    findings = []
    for block in log_blocks(text):
        first = block.split("\n", 1)[0]
        record = _LOG_RECORD.match(first)
        has_traceback = "Traceback (most recent call last)" in block
        if record is None and not has_traceback:
            continue
        level, logger = record.groups() if record else ("", "")
        tool = re.search(r"mcpserver\.tools: tool (\S+) raised", first)
        if tool and tool.group(1) in fail_on_purpose:
            continue
        if tool and has_traceback:
            findings.append(Finding("tool-crash", f"{where_in_text(block)} (tool {tool.group(1)})", block[-600:]))
        elif has_traceback:
            kind = "internal-error" if "internal error" in first else "traceback"
            findings.append(Finding(kind, where_in_text(block), block[-800:]))
        elif level in ("ERROR", "CRITICAL") and logger.startswith("mcpserver") and logger != "mcpserver.tools":
            findings.append(Finding("traceback", _normalise(first[record.end():] if record else first), first))
    return findings


def describe(data: bytes) -> str:
    """What a message asks for, in a few words: `tools/call reads_stdin`."""
    parsed, message = fuzz_check.decode(data)
    if not parsed or not isinstance(message, dict):
        return "a malformed message"
    if not isinstance(message.get("method"), str):
        return f"a message whose method is {fuzz_gen.json_kind(message.get('method'))}"
    params = message.get("params") if isinstance(message.get("params"), dict) else {}
    named = params.get("name", params.get("uri"))
    return message["method"] + (f" {named[:40]}" if isinstance(named, str) else "")


Triage = Optional[Callable[[fuzz_gen.Message], Optional[str]]]


def triaged(findings: list[Finding], message: fuzz_gen.Message, triage: Triage) -> list[Finding]:
    """A live server's slow or hung message named by where the core spends the time on it, when it does."""
    if triage is None or not any(f.kind in ("slow", "hang") for f in findings):
        return findings
    where = triage(message)
    if where is None:
        return findings
    return [f._replace(where=f"{f.where.split(' (')[0]} ({where})") if f.kind in ("slow", "hang") else f
            for f in findings]


def merged(findings: list[Finding]) -> list[Finding]:
    """One finding per fault: an answer's -32603 when the log already says where, a logged traceback when
    the crash it caused is reported, are dropped."""
    logged_internal = any(f.kind in ("internal-error", "traceback") and "internal error (" not in f.where
                          for f in findings)
    crashed = any(f.kind in ("crash", "hang") for f in findings)
    return [f for f in findings
            if not (logged_internal and f.kind == "internal-error" and f.where.startswith("internal error ("))
            and not (f.kind == "traceback" and crashed)]  # the traceback is the crash's own story


class _Live:
    """A live server process (restarted when it dies or hangs), with a time budget and a triage hook."""

    def __init__(self, target: str = FUZZ_SERVER, fail_on_purpose: tuple[str, ...] = (), hang_timeout: float = 10.0):
        self.target = target
        self.fail_on_purpose = fail_on_purpose
        self.hang_timeout = hang_timeout
        self.marks = 0
        self.restarts = -1
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.budget = Budget(slack=1.0)
        self.triage: Triage = None
        self.env: Optional[dict[str, str]] = None  # the server's environment (None: this process's)
        self.start()

    def start(self) -> None:
        raise NotImplementedError


class LiveStdio(_Live):
    """One stdio server process; restarted when it dies."""

    name = "stdio"


    def start(self) -> None:
        self.stop()
        self.restarts += 1
        self.process = subprocess.Popen(server_command(self.target), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, bufsize=0, env=self.env)
        self.answers: queue.Queue[Optional[bytes]] = queue.Queue()
        self.stderr = _Stderr(self.process.stderr)
        self.writes: queue.Queue[Optional[bytes]] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout, self.answers), daemon=True).start()
        threading.Thread(target=self._write, args=(self.process.stdin, self.writes), daemon=True).start()

    @staticmethod
    def _read(stream: Any, answers: queue.Queue[Optional[bytes]]) -> None:
        with io.BufferedReader(stream, 1 << 20) as reader:
            for line in iter(reader.readline, b""):
                answers.put(line)
        answers.put(None)

    @staticmethod
    def _write(stream: Any, writes: queue.Queue[Optional[bytes]]) -> None:
        while True:
            data = writes.get()
            if data is None:
                break
            try:
                stream.write(data)
            except (BrokenPipeError, OSError, ValueError):
                break

    def stop(self) -> None:
        if self.process is None:
            return
        self.writes.put(None)
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        self.process = None

    def exchange(self, data: bytes, timeout: Optional[float] = None) -> tuple[list[Any], float, str, str]:
        """Send `data` as one line; wait for as many responses as it holds requests (stdio answers in
        completion order, so a mark sent at once could overtake a slow call); then send a mark and take
        everything up to its answer, and the stderr up to its line. Returns (decoded lines, seconds to
        the last expected response, stderr logged, state "ok", "died" or "hung")."""
        expectations = [fuzz_check.expect(segment, http=False) for segment in fuzz_check.stdio_segments(data)]
        wanted = sum(e.answered for e in expectations)
        self.marks += 1
        n = self.marks
        started = time.perf_counter()
        self.writes.put(data + b"\n")
        lines: list[Any] = []
        deadline = time.monotonic() + (timeout or self.hang_timeout)
        state = self._collect(lines, deadline, lambda: sum(not _is_notification(x) for x in lines) >= wanted)
        elapsed = time.perf_counter() - started
        if state == "ok":
            self.writes.put(mark_request(n) + b"\n")
            state = self._collect(lines, time.monotonic() + self.hang_timeout, lambda: _is_mark(lines, n))
            if state == "ok":
                lines.pop()
        logged, _ = self.stderr.until(f"fuzz-mark {n}\n", 5.0 if state == "ok" else 0.5)
        return lines, elapsed, logged, state

    def _collect(self, lines: list[Any], deadline: float, done: Callable[[], bool]) -> str:
        deaths = self.stderr.deaths
        while not done():
            try:
                line = self.answers.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return "hung"
                if self.stderr.deaths > deaths:  # a server thread died: give it a moment, then call it hung
                    deadline = min(deadline, time.monotonic() + 0.5)
                continue
            if line is None:
                return "died"
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append(_NotJson(line))
        return "ok"

    def timer(self, data: bytes) -> float:
        _, elapsed, _, state = self.exchange(data)
        if state != "ok":
            self.start()
        return elapsed

    def check(self, message: fuzz_gen.Message, index: int = 0) -> list[Finding]:
        lines, elapsed, logged, state = self.exchange(message.data)
        findings = self.judge(message.data, lines, logged, state)
        size = max(len(message.data), sum(len(json.dumps(x)) for x in lines if not isinstance(x, _NotJson)))
        limit = self.budget.limit(size)
        if state == "ok" and elapsed > limit:
            best = elapsed if elapsed > 10 * limit else min(elapsed, self.timer(message.data),
                                                            self.timer(message.data))
            if best > limit:
                findings.append(Finding("slow", "stdio round trip", f"{best:.3f} s for {size} bytes; budget "
                                                                    f"{limit:.3f} s"))
        return triaged(findings, message, self.triage)

    def judge(self, data: bytes, lines: list[Any], logged: str, state: str) -> list[Finding]:
        findings = stderr_findings(logged, self.fail_on_purpose)
        if state != "ok":
            what = where_in_text(logged) if "Traceback" in logged else f"after {describe(data)}"
            findings.append(Finding("crash" if state == "died" else "hang", f"server {state} ({what})",
                                    (logged or self.stderr.tail())[-800:]))
            self.start()
            return merged(findings)
        for line in lines:
            if isinstance(line, _NotJson):
                findings.append(Finding("bad-answer", "stdout line is not JSON", line.raw[:300].decode("latin-1")))
        # One written line may hold several messages (a mutation can add newlines).
        expectations = [fuzz_check.expect(segment, http=False) for segment in fuzz_check.stdio_segments(data)]
        findings += judge_lines(expectations, [x for x in lines if not isinstance(x, _NotJson)])
        return merged(findings)


def _is_mark(lines: list[Any], n: int) -> bool:
    return bool(lines) and isinstance(lines[-1], dict) and lines[-1].get("id") == f"fuzz-mark-{n}"


class _NotJson(NamedTuple):
    raw: bytes


def _is_notification(line: Any) -> bool:
    return isinstance(line, dict) and "method" in line and "id" not in line


def judge_lines(expectations: list[Expected], lines: list[Any]) -> list[Finding]:
    """Answers and notifications a transport sent for some messages, paired with them by id (stdio may
    answer out of order)."""
    findings = []
    notifications = [x for x in lines if _is_notification(x)]
    responses = [x for x in lines if not _is_notification(x)]
    problem = fuzz_check.check_notifications(notifications, expectations)
    if problem:
        findings.append(Finding("bad-notification", _normalise(problem), problem))
    remaining = [e for e in expectations if e.answered]
    if len(responses) != len(remaining):
        unanswered = [e for e in expectations if not e.answered]
        if len(responses) > len(remaining) and unanswered:
            what = "notification" if any(e.notification for e in unanswered) else "client response"
            return [*findings, Finding("extra-answer", f"a {what} was answered", str(responses[-1])[:300])]
        findings.append(Finding("extra-answer" if len(responses) > len(remaining) else "no-answer",
                                "answer count differs from the messages that need one",
                                f"{len(responses)} answers for {len(remaining)} requests"))
    for response in responses:
        answer_id = response.get("id", ABSENT) if isinstance(response, dict) else ABSENT
        match = next((e for e in remaining if (e.id is ABSENT and answer_id is ABSENT)
                      or (e.id is not ABSENT and type(e.id) is type(answer_id) and e.id == answer_id)), None)
        if match is None and remaining:
            match = remaining[0]  # its id is wrong: judge_answers says how
        if match is None:
            continue
        remaining.remove(match)
        findings += judge_answers(match, [response])
    return findings


class HttpResponse(NamedTuple):
    status: int
    headers: dict[str, str]  # lower-case names; repeated ones joined
    body: bytes


def read_response(sock: socket.socket, buffer: bytearray, deadline: float, head_only: bool = False,
                  ) -> Optional[HttpResponse]:
    """One HTTP/1.1 response from `sock` (leftover bytes stay in `buffer`); None at EOF before any byte.
    `head_only` for a HEAD request, whose response has no body. A response without a status line (what
    http.server sends an HTTP/0.9 request) is the rest of the stream, with status 0."""
    def fill() -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("response deadline")
        sock.settimeout(remaining)
        chunk = sock.recv(1 << 20)
        if not chunk:
            return False
        buffer.extend(chunk)
        return True

    while b"\r\n\r\n" not in buffer:
        if len(buffer) >= 5 and not buffer.startswith(b"HTTP/"):
            while fill():
                pass
            body = bytes(buffer)
            buffer.clear()
            return HttpResponse(0, {}, body)
        if not fill():
            if buffer:
                raise ConnectionError(f"connection closed inside a response head: {bytes(buffer[:200])!r}")
            return None
    head, _, _rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ConnectionError(f"malformed status line {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        headers[key] = f"{headers[key]},{value.strip()}" if key in headers else value.strip()
    del buffer[:len(head) + 4]
    if head_only:
        body = b""
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = _read_chunked(buffer, fill)
    elif "content-length" in headers:
        length = int(headers["content-length"])
        while len(buffer) < length:
            if not fill():
                raise ConnectionError("connection closed inside a response body")
        body = bytes(buffer[:length])
        del buffer[:length]
    else:
        while fill():
            pass
        body = bytes(buffer)
        buffer.clear()
    return HttpResponse(int(parts[1]), headers, body)


_NO_LINE_BREAKS = {ord("\r"): None, ord("\n"): None, 0: None}
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
def _read_chunked(buffer: bytearray, fill: Callable[[], bool]) -> bytes:
    body = bytearray()
    while True:
        while b"\r\n" not in buffer:
            if not fill():
                raise ConnectionError("connection closed inside a chunk size")
        line, _, _ = bytes(buffer).partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        del buffer[:len(line) + 2]
        while len(buffer) < size + 2:
            if not fill():
                raise ConnectionError("connection closed inside a chunk")
        body += buffer[:size]
        del buffer[:size + 2]
        if size == 0:
            return bytes(body)


def sse_messages(body: bytes) -> tuple[list[Any], Optional[str]]:
    """The JSON messages of an SSE body (`data:` lines; comments, ids and priming events skipped); and what is
    wrong, if anything."""
    messages: list[Any] = []
    for frame in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in frame.split(b"\n") if line.startswith(b"data:")]
        # id: and retry: belong to resumable legacy streams; an id with empty data primes one
        other = [line for line in frame.split(b"\n")
                 if line and not line.startswith((b"data:", b":", b"id:", b"retry:"))]
        if other:
            return messages, f"SSE lines that are neither data, id, retry nor comments: {other[0][:100]!r}"
        if any(data):
            try:
                messages.append(json.loads(b"\n".join(data)))
            except ValueError:
                return messages, f"SSE data that is not JSON: {b''.join(data)[:100]!r}"
    return messages, None


TRANSPORT_REFUSALS = {400, 403, 404, 405, 406, 411, 413, 414, 415, 431, 501, 503, 505}


class LiveHttp(_Live):
    """One HTTP server process, spoken to over a raw keep-alive socket; restarted when it dies."""

    name = "http"

    def __init__(self, target: str = FUZZ_SERVER, fail_on_purpose: tuple[str, ...] = (), hang_timeout: float = 10.0,
                 gen_target: Optional[fuzz_gen.Target] = None):
        self.gen_target = gen_target or fuzz_gen.Target([], [], [], [])
        self.sock: Optional[socket.socket] = None
        self.buffer = bytearray()
        super().__init__(target, fail_on_purpose, hang_timeout)

    def start(self) -> None:
        self.stop()
        self.restarts += 1
        self.process = subprocess.Popen(server_command(self.target, "--http", "--port", "0"),
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        env=self.env)
        self.stderr = _Stderr(self.process.stderr)
        text, found = self.stderr.until(" at http://", 30)
        line = self.stderr.lines[self.stderr.consumed - 1] if found else ""
        match = re.search(r"at http://(\[[^\]]+\]|[^:/]+):(\d+)(/\S*)", line)
        if match is None:
            raise RuntimeError(f"the HTTP server did not start:\n{text}{self.stderr.tail()}")
        self.host, self.port, self.path = match.group(1).strip("[]"), int(match.group(2)), match.group(3)

    def stop(self) -> None:
        self._disconnect()
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        assert self.process.stderr is not None
        self.process.stderr.close()
        self.process = None

    def _disconnect(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.buffer.clear()

    def connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.hang_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def request_bytes(self, data: bytes, headers: Optional[list[tuple[str, str]]]) -> bytes:
        if headers is None:
            parsed, message = fuzz_check.decode(data)
            headers = fuzz_gen.mirrored_headers(message if parsed else None, self.gen_target)
        lines = [f"POST {self.path} HTTP/1.1"]
        if not any(name.lower() == "host" for name, _ in headers):
            lines.append(f"Host: 127.0.0.1:{self.port}")
        # A client cannot put CR, LF or NUL in a header value (that would be its own injection, not the server's).
        lines += [f"{name}: {value.translate(_NO_LINE_BREAKS)}" for name, value in headers]
        lines.append(f"Content-Length: {len(data)}")
        # Header text past latin-1 (a method name with a lone surrogate, mirrored) goes out as its UTF-8 bytes.
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogatepass") + data

    def roundtrip(self, raw: bytes, timeout: float) -> tuple[Optional[HttpResponse], str]:
        """Send one request on the kept-alive connection; (response, problem)."""
        deadline = time.monotonic() + timeout
        try:
            if self.sock is None:
                self.sock = self.connect()
            self.sock.sendall(raw)
            response = read_response(self.sock, self.buffer, deadline)
        except socket.timeout:
            self._disconnect()
            return None, "hung"
        except (ConnectionError, OSError) as exc:
            self._disconnect()
            return None, f"connection failed: {exc}"
        if response is None:
            self._disconnect()
            return None, "closed without a response"
        if response.headers.get("connection", "").lower() == "close":
            self._disconnect()
        return response, ""

    def exchange(self, data: bytes, headers: Optional[list[tuple[str, str]]],
                 timeout: Optional[float] = None) -> tuple[Optional[HttpResponse], float, str, str]:
        """(response, seconds, stderr logged, problem) for one message and the mark after it."""
        self.marks += 1
        n = self.marks
        started = time.perf_counter()
        response, problem = self.roundtrip(self.request_bytes(data, headers), timeout or self.hang_timeout)
        elapsed = time.perf_counter() - started
        if self.process is not None and self.process.poll() is not None:
            return response, elapsed, self.stderr.until("\0", 0.5)[0], "died"
        if response is None:
            time.sleep(0.2)  # a handler thread that died may still be printing its traceback
        mark, mark_problem = self.roundtrip(self.request_bytes(mark_request(n), None), self.hang_timeout)
        if mark is None or mark.status != 200:
            died = self.process is None or self.process.poll() is not None
            return response, elapsed, self.stderr.until("\0", 0.5)[0], "died" if died else (
                problem or f"the mark after it failed: {mark_problem or mark.status if mark else mark_problem}")
        logged, _ = self.stderr.until(f"fuzz-mark {n}\n", 5.0)
        return response, elapsed, logged, problem

    def timer(self, data: bytes) -> float:
        return self.exchange(data, None)[1]

    def check(self, message: fuzz_gen.Message, index: int = 0) -> list[Finding]:
        response, elapsed, logged, problem = self.exchange(message.data, message.headers)
        findings = self.judge(message, response, logged, problem)
        size = max(len(message.data), len(response.body) if response else 0)
        limit = self.budget.limit(size)
        if response is not None and elapsed > limit:
            best = elapsed if elapsed > 10 * limit else min(
                elapsed, *(self.exchange(message.data, message.headers)[1] for _ in range(2)))
            if best > limit:
                findings.append(Finding("slow", "HTTP round trip", f"{best:.3f} s for {size} bytes; budget "
                                                                   f"{limit:.3f} s"))
        return triaged(findings, message, self.triage)

    def judge(self, message: fuzz_gen.Message, response: Optional[HttpResponse], logged: str,
              problem: str) -> list[Finding]:
        findings = stderr_findings(logged, self.fail_on_purpose)
        if problem == "died" or (self.process is not None and self.process.poll() is not None):
            what = where_in_text(logged) if "Traceback" in logged else f"after {describe(message.data)}"
            findings.append(Finding("crash", f"server died ({what})", (logged or self.stderr.tail())[-800:]))
            self.start()
            return merged(findings)
        if response is None:
            if problem == "hung":
                findings.append(Finding("hang", f"no response ({describe(message.data)})", problem))
                self.start()  # whatever holds it may hold the whole process (the GIL): start clean
            else:
                findings.append(Finding("transport", f"{problem.split(':')[0]} ({describe(message.data)})", problem))
            return merged(findings)
        if problem:
            findings.append(Finding("transport", _normalise(problem), problem))
        content_type = response.headers.get("content-type", "")
        expected = fuzz_check.expect(message.data, http=True)
        if content_type.startswith("text/event-stream"):
            messages, sse_problem = sse_messages(response.body)
            if sse_problem:
                findings.append(Finding("bad-answer", _normalise(sse_problem), sse_problem))
            if response.status != 200:
                findings.append(Finding("status", f"HTTP {response.status} for a stream", repr(response.body[:200])))
            if messages and _is_notification(messages[-1]):
                findings.append(Finding("bad-answer", "a stream that does not end with the response",
                                        str(messages[-1])[:200]))
            findings += judge_lines([expected], messages)
        elif content_type.startswith("application/json"):
            try:
                answer = json.loads(response.body)
            except ValueError:
                return [*findings, Finding("bad-answer", "JSON response body is not JSON", repr(response.body[:300]))]
            findings += judge_answers(expected, [answer])
            status_problem = fuzz_check.check_status(response.status, answer)
            if status_problem:
                findings.append(Finding("status", _normalise(status_problem), status_problem))
        elif response.status == 202:
            if response.body:
                findings.append(Finding("bad-answer", "202 with a body", repr(response.body[:200])))
            if not expected.notification:
                findings.append(Finding("no-answer", "202 for a message that is not a notification",
                                        repr(message.data[:200])))
        elif response.status in TRANSPORT_REFUSALS:
            # A conforming client's headers get past the transport, unless the message is too big to send or
            # the body holds what no header can (a control character mirrored from the body).
            mirrored = "".join(v for _, v in fuzz_gen.mirrored_headers(fuzz_check.decode(message.data)[1],
                                                                         self.gen_target))
            if message.headers is None and response.status not in (413, 431) and not _CONTROL.search(mirrored):
                findings.append(Finding("status", f"HTTP {response.status} refused conforming headers",
                                        response.body[:300].decode("latin-1")))
        else:
            findings.append(Finding("status", f"HTTP {response.status} {content_type}",
                                    response.body[:300].decode("latin-1")))
        return merged(findings)

    # -- framing: requests whose HTTP itself is broken ----------------------------------------------------

    def framing(self, raw: bytes, timeout: float) -> list[Finding]:
        """Send `raw` on a fresh connection, close our side, read every response until the server closes."""
        findings: list[Finding] = []
        responses: list[HttpResponse] = []
        self.marks += 1
        n = self.marks
        raw = raw.replace(b"{PORT}", str(self.port).encode())
        sock = self.connect()
        deadline = time.monotonic() + timeout
        buffer = bytearray()
        try:
            try:
                sock.sendall(raw)
                sock.shutdown(socket.SHUT_WR)
            except OSError:  # the server refused the head and hung up before the rest arrived: read its answer
                pass
            head_only = raw.startswith(b"HEAD ")
            while True:
                response = read_response(sock, buffer, deadline, head_only)
                if response is None:
                    break
                responses.append(response)
                head_only = False
        except socket.timeout:
            findings.append(Finding("hang", "framing: no end of responses", repr(raw[:200])))
        except (ConnectionError, OSError) as exc:
            if not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
                findings.append(Finding("transport", _normalise(f"framing: {exc}"), repr(raw[:200])))
        finally:
            sock.close()
        for response in responses:
            if response.status == 500:
                findings.append(Finding("status", "framing: HTTP 500", repr(raw[:300])))
        if smuggled(raw, responses):
            findings.append(Finding("smuggling", "the body was run as a request",
                                    f"{[r.status for r in responses]} for {raw[:300]!r}"))
        if self.process is not None and self.process.poll() is not None:
            findings.append(Finding("crash", "server died on framing", self.stderr.tail()[-800:]))
            self.start()
            return findings
        mark, _ = self.roundtrip(self.request_bytes(mark_request(n), None), self.hang_timeout)
        logged, _ = self.stderr.until(f"fuzz-mark {n}\n", 5.0)
        findings += stderr_findings(logged, self.fail_on_purpose)
        if mark is None or mark.status != 200:
            findings.append(Finding("transport", "server unusable after a framing attack", repr(raw[:300])))
        return findings


def smuggled(raw: bytes, responses: list[HttpResponse]) -> bool:
    """Whether the second request inside a framing_request's body was answered although the first one
    declared a body (by a framing header, well-formed or not): its framing was read one way to refuse it
    and another way to find where it ends (request smuggling). Without such a header the bytes after
    the head are a pipelined request, rightly answered."""
    head = raw.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    framed = re.search(rb"(?im)^[ \t]*(content-length|transfer-encoding)[ \t]*:", head) is not None
    return framed and any(b'"smuggled"' in response.body for response in responses)


def framing_request(rng: random.Random, path: str) -> bytes:
    """A request whose framing (request line, Content-Length, Transfer-Encoding, header syntax) is off. Its
    body, where it has one, is a second complete request: answered only if the first one's framing leaks.
    The port is left as {PORT}, filled in when sent, so a saved request replays against any server."""
    inner = fuzz_gen.to_bytes({"jsonrpc": "2.0", "id": "smuggled", "method": "tools/list", "params": {"_meta": META}})
    smuggled = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                f"MCP-Protocol-Version: {fuzz_gen.VERSION}\r\nMcp-Method: tools/list\r\n"
                f"Content-Length: {len(inner)}\r\n\r\n").encode() + inner
    body = smuggled
    n = len(body)
    line = f"POST {path} HTTP/1.1"
    headers = ["Host: 127.0.0.1:{PORT}", "Content-Type: application/json", "Connection: keep-alive"]
    roll = rng.randrange(8)
    if roll <= 2:
        headers.append("Content-Length: " + rng.choice(
            [f"+{n}", f"{n} ", f" {n}", f"-{n}", f"{n // 10}_{n % 10}", f"0x{n:x}", "\u00b2", "\u0661\u0662",
             f"{n}.0", f"{n},{n}", f"{n}, {n + 1}", "", "99999999999999999999999", f"{n}\t", f"0{n}", "1e3"]))
    elif roll == 3:
        headers += [f"Content-Length: {n}", f"Content-Length: {rng.choice([0, n + 5, n // 2])}"]
    elif roll == 4:
        headers.append("Transfer-Encoding: " + rng.choice(["chunked", "identity", "identity, chunked", "Chunked",
                                                           " chunked", "chunked, identity", "gzip", "x"]))
        if rng.random() < 0.5:
            headers.append(f"Content-Length: {n}")
        if rng.random() < 0.5:
            headers.insert(0, "Transfer-Encoding: identity")
    elif roll == 5:
        line = rng.choice([f"POST {path} HTTP/1.0", f"POST {path} HTTP/2.0", f"POST  {path} HTTP/1.1",
                           f"POST {path}", f"post {path} HTTP/1.1", f"POST {path}?x=1 HTTP/1.1", "POST /%6dcp HTTP/1.1",
                           f"POST {path}%00 HTTP/1.1", f"POST http://127.0.0.1{path} HTTP/1.1", "POST * HTTP/1.1",
                           f"POST {path}/ HTTP/1.1", f"POST {path}\x00 HTTP/1.1", f"POST /{'a' * 70_000} HTTP/1.1",
                           f"BREW {path} HTTP/1.1", f"GET {path} HTTP/1.1", f"HEAD {path} HTTP/1.1",
                           f"POST {path} HTTP/1.1 extra", "", "\r\n"])
        headers.append(f"Content-Length: {n}")
    elif roll == 6:
        headers.append(rng.choice([f"Content-Length : {n}", f"Content-Length:\t{n}", f"content-length: {n}",
                                   f"Content-Length: {n}\r\n folded", f"Content_Length: {n}", f"Content-Length {n}",
                                   f"X: y\r\nContent-Length: {n}\x00"]))
    else:
        headers += [f"Content-Length: {n}", rng.choice(["Expect: 100-continue", "Connection: close",
                                                       "Connection: upgrade\r\nUpgrade: h2c",
                                                       "Content-Encoding: gzip"])]
    newline = "\n" if rng.random() < 0.1 else "\r\n"
    head = newline.join([line, *headers]) + newline + newline
    return head.encode("utf-8", "surrogateescape") + body


# ---------------------------------------------------------------------------------------------
# Super-linear shapes: time at doubling sizes against the linear reference at the same sizes


class Scaling(NamedTuple):
    kind: str
    sizes: list[int]
    seconds: list[float]
    reference: list[float]
    superlinear: bool
    exponent: float  # how the time grows with size, relative to the reference (0: linear)

    def describe(self) -> str:
        steps = ", ".join(f"{n // 1000}K {t * 1000:.1f} ms" for n, t in zip(self.sizes, self.seconds))
        return f"{self.kind}: {steps}; growth beyond linear: size^{self.exponent:.2f}"


def scaling(kind: str, run: Callable[[bytes], float], sizes: list[int], stop_after: float = 1.5,
            repeats: int = 3) -> Scaling:
    """Time `kind` at each size (best of `repeats`, fewer when slow) and the echo reference at the same
    byte count; super-linear when, on each of the last two doublings, time grows at least size^0.6 faster
    than the reference does and the largest size took over 50 ms, or when the largest size took over
    0.25 s and 100 times the reference."""
    import math

    measured, seconds, reference = [], [], []
    for size in sizes:
        data = fuzz_gen.repetitive(kind, size)
        first = run(data)
        best = first if first > stop_after else min([first] + [run(data) for _ in range(repeats - 1)])
        echo = echo_request(len(data))
        ref = min(run(echo) for _ in range(repeats))
        measured.append(len(data))
        seconds.append(best)
        reference.append(ref)
        if best > stop_after:
            break
    # Growth beyond the reference's on each of the last two steps measurable (from 2 ms), the smaller of the
    # two: a fixed cost that starts at one size (a log line once a partial line passes 64 KB) makes one
    # step steep, a super-linear cost makes every step steep.
    usable = [i for i, t in enumerate(seconds) if t >= 0.002][-3:]
    steps = []
    for lo, hi in zip(usable, usable[1:]):
        span = math.log(measured[hi] / measured[lo])
        if span > 0:
            steps.append((math.log(seconds[hi] / seconds[lo])
                          - math.log(max(reference[hi], 1e-9) / max(reference[lo], 1e-9))) / span)
    exponent = min(steps) if len(steps) == 2 else 0.0
    # Or a cost so far above the reference at the largest size measured that the ladder had to stop before
    # growth could be seen (a cubic shape is at seconds by 1 KB).
    superlinear = (exponent > 0.6 and seconds[-1] > 0.05) or (seconds[-1] > 0.25 and seconds[-1] > 100 * reference[-1])
    return Scaling(kind, measured, seconds, reference, superlinear, exponent)


# ---------------------------------------------------------------------------------------------
# Minimising a failing message


def minimise(data: bytes, headers: Optional[list[tuple[str, str]]], still_fails: Callable[[bytes, Any], bool],
             seconds: float = 60.0, tries: int = 400) -> tuple[bytes, Optional[list[tuple[str, str]]]]:
    """The smallest message (and header list) found within the limits for which `still_fails` holds:
    structural steps on the JSON first (drop keys and items, halve strings), then byte ranges, then headers."""
    deadline = time.monotonic() + seconds
    budget = [tries]

    def attempt(candidate: bytes, candidate_headers: Any) -> bool:
        if budget[0] <= 0 or time.monotonic() > deadline:
            return False
        budget[0] -= 1
        try:
            return still_fails(candidate, candidate_headers)
        except Exception:
            return False

    parsed, value = fuzz_check.decode(data)
    if parsed:
        encoded = _dump(value)
        if encoded != data and attempt(encoded, headers):
            data = encoded
        if data == encoded:
            improved = True
            while improved and budget[0] > 0 and time.monotonic() < deadline:
                improved = False
                for candidate in _smaller_values(value):
                    candidate_bytes = _dump(candidate)
                    if len(candidate_bytes) < len(data) and attempt(candidate_bytes, headers):
                        value, data, improved = candidate, candidate_bytes, True
                        break
    chunk = max(1, len(data) // 2)
    while chunk >= 1 and budget[0] > 0 and time.monotonic() < deadline:
        position, shrunk = 0, False
        while position < len(data) and budget[0] > 0:
            candidate = data[:position] + data[position + chunk:]
            if candidate and attempt(candidate, headers):
                data, shrunk = candidate, True
            else:
                position += chunk
        if not shrunk:
            chunk //= 2
    if headers:
        for header in list(headers):
            smaller = [h for h in headers if h is not header]
            if attempt(data, smaller):
                headers = smaller
    return data, headers


def _dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _smaller_values(value: Any) -> Any:
    """Candidates one step simpler than `value`, biggest cuts first."""
    if isinstance(value, dict):
        keys = list(value)
        for key in keys:
            yield {k: v for k, v in value.items() if k != key}
        for key in keys:
            for smaller in _smaller_values(value[key]):
                yield {**value, key: smaller}
    elif isinstance(value, list):
        if len(value) > 1:
            yield value[:len(value) // 2]
            yield value[len(value) // 2:]
        for i in range(len(value)):
            yield value[:i] + value[i + 1:]
        for i, item in enumerate(value):
            for smaller in _smaller_values(item):
                yield [*value[:i], smaller, *value[i + 1:]]
    elif isinstance(value, str) and value:
        yield value[:len(value) // 2]
        if len(value) > 1:
            yield value[len(value) // 2:]
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1:
        yield value // 2
