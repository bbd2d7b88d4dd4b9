"""Helpers for talking to a real mcpserver: request builders and a stdio client over real pipes."""

from __future__ import annotations

import http.client
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "server", "examples")
DEMO = os.path.join(EXAMPLES, "demo.py")
MOVIES = os.path.join(EXAMPLES, "movies.py")
GIT = os.path.join(EXAMPLES, "git.json")
SLOW_TOOLS = os.path.join(ROOT, "tests", "slow_tools.py")
RESUME_TOOLS = os.path.join(ROOT, "tests", "resume_tools.py")
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "mcptest", "version": "1"},
}


def request(method: str, id: Any = 1, meta: Optional[dict[str, Any]] = None, **params: Any) -> dict[str, Any]:
    """A well-formed request; `meta` replaces the standard _meta."""
    return {"jsonrpc": "2.0", "id": id, "method": method,
            "params": {"_meta": dict(META) if meta is None else meta, **params}}


def call(tool: str, id: Any = 1, **arguments: Any) -> dict[str, Any]:
    return request("tools/call", id, name=tool, arguments=arguments)


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def read_text(path: str) -> str:
    """The file's text; "" while it does not exist yet."""
    try:
        with open(path) as file:
            return file.read()
    except FileNotFoundError:
        return ""


def fill_file_system(where: Any) -> str:
    """Fill the file system `where` is on with a file in it (written unbuffered: nothing is left to write at its
    close); the file's path, to remove when room must come back."""
    filler = os.path.join(str(where), "filler")
    with open(filler, "wb", buffering=0) as file:
        try:
            while True:
                file.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (for servers whose URL must be known before they start)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(target: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mcpserver", *extra, target]


class _ServerProcess:
    """A server process whose stderr is collected line by line in the background."""

    def __init__(self, argv: list[str], env: Optional[dict[str, str]], stdin: Any, stdout: Any):
        self.process = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                        env={**os.environ, **(env or {})})
        self._stderr: list[str] = []
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self._stderr.append(raw.decode("utf-8", "replace"))
            self.on_stderr_line(self._stderr[-1])
        self.on_stderr_line("")

    def on_stderr_line(self, text: str) -> None:
        """Called for each stderr line, and with "" at EOF."""

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def finish_stderr(self) -> None:
        """After the process exited: wait until everything it wrote to stderr has been collected."""
        self._drainer.join(10)

    def wait_for_stderr(self, text: str, timeout: float = 30, times: int = 1) -> None:
        """Block until `text` has appeared `times` times on the server's stderr (evidence, not a guess by
        sleeping; a server shared by several tests counts what earlier tests made it write)."""
        import time

        deadline = time.monotonic() + timeout
        while self.stderr.count(text) < times:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"{text!r} never appeared on stderr:\n{self.stderr}")
            time.sleep(0.01)

    def __exit__(self, *exc: Any) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._drainer.join(5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


class StdioServer(_ServerProcess):
    """`python -m mcpserver TARGET` on real pipes; stdout is read line by line in the background, so a
    test waiting for an answer that never comes fails after `timeout` instead of hanging."""

    def __init__(self, target: str = DEMO, *extra: str, env: Optional[dict[str, str]] = None,
                 argv: Optional[list[str]] = None):
        super().__init__(argv or server_command(target, *extra), env, subprocess.PIPE, subprocess.PIPE)
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    @classmethod
    def from_argv(cls, argv: list[str], env: Optional[dict[str, str]] = None) -> StdioServer:
        """A stdio server started by an argv of the test's own (e.g. under unshare)."""
        return cls(env=env, argv=argv)

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.put(raw)
        self._lines.put(b"")  # EOF

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        try:
            raw = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s; stderr:\n{self.stderr}") from None
        if not raw:
            self._lines.put(b"")  # stays at EOF for later calls
            raise EOFError(f"server closed stdout; stderr:\n{self.stderr}")
        return json.loads(raw)

    def ask(self, message: Any, timeout: float = 30) -> dict[str, Any]:
        self.send(line(message))
        return self.receive(timeout)

    def close(self, timeout: float = 10) -> tuple[int, bytes]:
        """Close stdin; return the exit status and whatever else stdout carried."""
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        rest = []
        while True:
            raw = self._lines.get_nowait()
            if not raw:
                self._lines.put(b"")
                break
            rest.append(raw)
        self._drainer.join(5)
        return code, b"".join(rest)

    def __enter__(self) -> StdioServer:
        return self


def run_once(target: str, data: bytes, *extra: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    """Feed `data` to a fresh server's stdin, close it, and collect everything."""
    return subprocess.run(server_command(target, *extra), input=data, capture_output=True, timeout=timeout)


# What run_signal_probe puts before each script: a trace function that sends SIGINT (or does `send`) at the nth
# line run in the frames `watched` accepts (callees included; of those lines, the ones `counts` accepts), until
# `finished` sees one of them return; `unfired` runs then if the nth line never came. `counted`: lines already
# counted (by the process this one replaced, say).
_SIGNAL_AT_A_LINE = """
import os, signal, sys


def signal_at_line(nth, watched, finished, unfired=lambda: None, send=None, counted=0, counts=lambda frame: True):
    state = {"lines": counted, "fired": False, "finished": False}

    def trace(frame, event, arg):
        if state["finished"] or not watched(frame):
            return None
        if event == "line" and counts(frame):
            state["lines"] += 1
            if state["lines"] == nth:
                state["fired"] = True
                send() if send is not None else os.kill(os.getpid(), signal.SIGINT)
        elif event == "return" and finished(frame):
            state["finished"] = True  # the place under test ran whole: the rest of the run is not under test
            if not state["fired"]:
                unfired()
        return trace

    return trace, state
"""


def signal_probe_source(script: str) -> str:
    """`script` with `signal_at_line` defined before it: for a probe run another way than run_signal_probe's."""
    return _SIGNAL_AT_A_LINE + script


def run_signal_probe(script: str, hung: str, timeout: float = 60) -> bytes:
    """Run a `python -c` script that stops servers with signals, `signal_at_line` defined for it; its stderr once
    it exits 0. A script still running after `timeout` seconds has hung: the test fails saying `hung`, with the
    script's last words."""
    import pytest

    process = subprocess.Popen([sys.executable, "-c", signal_probe_source(script)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        pytest.fail(f"{hung}: {stderr.decode()[-2000:]}")
    assert process.returncode == 0, stderr.decode()[-2000:]
    return stderr


def responses(stdout: bytes) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in stdout.splitlines()]


# Methods whose params carry the value mirrored in Mcp-Name (WIRE.md; mcpserver._methods.NAMED_BY).
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
            "tasks/update": "taskId", "tasks/cancel": "taskId"}


def mcp_headers(message: dict[str, Any]) -> dict[str, str]:
    """The headers a 2026-07-28 client sends with `message` (Mcp-Name base64-encoded when not plain ASCII)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if "id" not in message:
        return headers
    params = message.get("params", {})
    headers["MCP-Protocol-Version"] = params.get("_meta", {}).get("io.modelcontextprotocol/protocolVersion", VERSION)
    headers["Mcp-Method"] = message["method"]
    name = params.get(NAMED_BY.get(message["method"], ""))
    if message["method"] in NAMED_BY and isinstance(name, str):
        if name.isascii() and name.isprintable() and name == name.strip():
            headers["Mcp-Name"] = name
        else:
            import base64

            headers["Mcp-Name"] = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    return headers


def raw_post(message: dict[str, Any], body: Optional[bytes] = None) -> bytes:
    """A whole HTTP/1.1 POST of `message` (or of `body`, sent with `message`'s headers) to /mcp, for a test that
    writes to the socket itself: one that stalls, hangs up or never reads."""
    body = json.dumps(message).encode() if body is None else body
    head = "".join(f"{k}: {v}\r\n" for k, v in mcp_headers(message).items())
    return f"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body


class UnixConnection(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a Unix socket, to Host: localhost (as curl --unix-socket sends it)."""

    def __init__(self, path: str, timeout: float = 30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


class HttpServer(_ServerProcess):
    """`python -m mcpserver --http --port 0 TARGET` as a real process; the URL is read from its stderr."""

    def __init__(self, target: str = DEMO, *extra: str, env: Optional[dict[str, str]] = None, startup: float = 20,
                 tls: Any = None, unix: Optional[str] = None, wrap: tuple[str, ...] = ()):
        """`tls`: the ssl.SSLContext clients use when the server serves HTTPS (--tls-cert); `unix`: serve on that
        Unix socket (--http unix:PATH) instead of a port, where every request of the helpers then goes; `wrap`: a
        command the server runs under (unshare, say)."""
        import re

        self._ready = threading.Event()
        self.tls = tls
        self.unix = unix
        where = ["--http", f"unix:{unix}"] if unix is not None else ["--http", "--port", "0"]
        super().__init__([*wrap, *server_command(target, *where, *extra)], env, subprocess.DEVNULL, subprocess.DEVNULL)
        if not self._ready.wait(startup):
            self.process.kill()
            raise RuntimeError(f"server did not start; stderr:\n{self.stderr}")
        if unix is not None:
            match = re.search(r"at unix:\S+ \((https?)://(localhost)(/\S*) on it\)", self.stderr)
        else:
            match = re.search(r"at (https?)://(\[[^\]]+\]|[^:/]+):(\d+)(/\S*)", self.stderr)
        if match is None:
            self.process.kill()
            raise RuntimeError(f"server did not print its URL; stderr:\n{self.stderr}")
        self.scheme, self.host, self.path = match.group(1), match.group(2).strip("[]"), match.group(match.lastindex)
        self.port = 0 if unix is not None else int(match.group(3))

    @classmethod
    def attach(cls, port: int, process: Any = None, *, host: str = "127.0.0.1", path: str = "/mcp") -> HttpServer:
        """A server started some other way (gunicorn, say), to talk to with the same helpers."""
        server = cls.__new__(cls)
        server.process, server.host, server.port, server.path, server.scheme, server.tls, server.unix = (
            process, host, port, path, "http", None, None)
        return server

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    def on_stderr_line(self, text: str) -> None:
        if " at http" in text or " at unix:" in text or not text:
            self._ready.set()

    def connection(self, timeout: float = 30) -> Any:
        import http.client

        if self.unix is not None:
            return UnixConnection(self.unix, timeout)
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def post(self, message: Any = None, *, headers: Optional[dict[str, str]] = None, body: Optional[bytes] = None,
             method: str = "POST", path: Optional[str] = None,
             connection: Any = None) -> tuple[int, dict[str, str], Any]:
        """One request; returns (status, headers with lower-case names, decoded JSON body or raw bytes)."""
        own = connection is None
        connection = connection or self.connection()
        try:
            data = body if body is not None else json.dumps(message).encode()
            sent = mcp_headers(message) if headers is None and isinstance(message, dict) else dict(headers or {})
            connection.request(method, path or self.path, body=data if method != "GET" else None, headers=sent)
            response = connection.getresponse()
            raw = response.read()
            received = {k.lower(): v for k, v in response.getheaders()}
            decoded: Any = raw
            if received.get("content-type") == "application/json":
                decoded = json.loads(raw)
            return response.status, received, decoded
        finally:
            if own:
                connection.close()

    def stop(self, signum: int = 15, timeout: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(timeout)

    def __enter__(self) -> HttpServer:
        return self


def _gunicorn() -> tuple[list[str], str]:
    """How to start gunicorn (its script where pip installed one; else `python -m gunicorn` where the package is
    importable: the lab's cells have it in their wheel folder, unpacked, with no script), or why it cannot start."""
    import importlib.util

    if importlib.util.find_spec("_ssl") is None:  # gunicorn imports ssl whatever it serves (gunicorn/sock.py)
        return [], ("gunicorn imports ssl, and this Python was built without it "
                    "(the musl image's: docs/platforms/musl.md)")
    script = shutil.which("gunicorn") or os.path.join(os.path.dirname(sys.executable), "gunicorn")
    if os.path.exists(script):
        return [script], ""
    if importlib.util.find_spec("gunicorn"):
        return [sys.executable, "-m", "gunicorn"], ""
    return [], "gunicorn is not installed here (the test extra has it, and the lab's wheel folders)"


try:
    import sqlite3  # noqa: F401  (a Python built without it: the musl-busybox lab cell)

    HAS_SQLITE = True
except ImportError:
    HAS_SQLITE = False
SQLITE_MISSING = "this Python has no sqlite3 module (built without SQLite)"

GUNICORN, GUNICORN_MISSING = _gunicorn()  # GUNICORN_MISSING: why it cannot run here ('' when it can)
HAS_GUNICORN = bool(GUNICORN)
# mcpserver's gunicorn settings, as docs/guides/http.md asks on PyPy (its master's signal queue; on CPython a no-op)
GUNICORN_CONF = ("-c", "python:mcpserver.http.gunicorn_conf")


def wait_for_port(port: int, process: subprocess.Popen, seconds: float, said: Any = None) -> None:
    """Until a loopback `port` accepts a connection; RuntimeError (with `said()`, its stderr perhaps) when `process`
    exits or `seconds` pass first."""
    import socket

    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{process.args[:4]} did not start (exit status {process.poll()})"
                                   f"{chr(10) + said() if said else ''}") from None
            time.sleep(0.05)


@contextmanager
def gunicorn_server(app: str, *options: str, env: Optional[dict[str, str]] = None,
                    port: Optional[int] = None) -> Iterator[HttpServer]:
    """`gunicorn OPTIONS APP` on a loopback port (a free one unless given), once it accepts connections;
    stopped (SIGTERM) after."""
    import signal

    port = port or free_port()
    process = subprocess.Popen([*GUNICORN, *GUNICORN_CONF, "-b", f"127.0.0.1:{port}", "--log-level", "warning",
                                *options, app],
                               env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, 20)
        yield HttpServer.attach(port, process)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)


def core_reply(message: Any, server: Any, headers: Optional[dict[str, str]] = None, flight: Any = None) -> Any:
    """What a transport gets from the core for `message` (bytes, or an already decoded value): parse,
    then dispatch a request. The Reply; None for what is never answered (a notification, a cancel, a
    response from the client)."""
    from mcpserver import protocol

    typed = protocol.parse(message) if isinstance(message, bytes) else protocol.classify(message)
    if isinstance(typed, protocol.Refusal):
        return typed.reply
    if isinstance(typed, protocol.Request):
        return protocol.dispatch(typed, server, headers, flight=flight)
    return None


def answer(message: Any, server: Any) -> Optional[dict[str, Any]]:
    """The response the core gives for a decoded message, as stdio would send it; None when nothing is sent."""
    reply = core_reply(message, server)
    return None if reply is None else reply.response


def start_slow_calls(server: Any, count: int, seconds: float, answers: list[int]) -> list[threading.Thread]:
    """`count` calls of slow_tools' `slow`, each on its own thread appending its status to `answers`,
    returned once the server has said each started."""
    import time

    callers = [threading.Thread(target=lambda: answers.append(server.post(call("slow", seconds=seconds))[0]))
               for _ in range(count)]
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + 10
    while server.stderr.count("slow: started") < count:
        assert time.monotonic() < deadline, server.stderr
        time.sleep(0.01)
    return callers
