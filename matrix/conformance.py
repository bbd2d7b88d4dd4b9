"""The conformance suite (issue 17): the official suite, from the host, against the cell's own server serving
examples/everything.py over HTTP; scripts/conformance.py runs its sets (the required profiles, the extensions'
scenarios, the older revisions') and writes one JUnit testcase per scenario with its checks' counts (one that
exercised nothing is skipped, saying so), so the verdict is judged like every other suite's.

A container cell's server binds 0.0.0.0 inside its container with --insecure-no-auth (the suite sends no
token) and its port is published on the engine's loopback only; --allow-host and --allow-origin name the
loopback URL the suite uses, so the server's DNS-rebinding protection is under test too. The suite's
dns-rebinding scenario insists on a loopback URL: when the engine is elsewhere (DOCKER_HOST=tcp://...), a
relay on this host's loopback forwards to the published port. A host cell's server is started as a
developer starts it: `--http --port 0`, loopback, no token.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import LAB_ROOT
from .engine import LABEL, RUN_LABEL, ContainerSpec, Engine
from .model import Outcome, Suite, SuiteResult
from .outcomes import Attempt, judge
from .processes import Processes

SCRIPT = LAB_ROOT / "scripts" / "conformance.py"  # the harness's own tool, whichever tree is tested
EVERYTHING_IN_IMAGE = "/opt/mcpserver/examples/everything.py"
READY_DEADLINE = 30.0
INSTALL_TIMEOUT = 900.0
START_TRIES = 3  # a port found free can be taken before docker binds it
DISCOVER = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
).encode()  # fmt: skip


class ConformanceTool:
    """Node and the pinned suite in .cache/conformance: installed at most once per run, whatever number of
    cells ask (scripts/conformance.py --install), and the script that runs it."""

    def __init__(self, processes: Processes, log: Path, script: Path = SCRIPT) -> None:
        self.processes = processes
        self.script = script
        self.log = log
        self._lock = threading.Lock()
        self._problem: str | None = None

    def ready(self) -> str:
        """'' once installed, else why not (the same answer for every cell of the run)."""
        with self._lock:
            if self._problem is None:
                done = self.processes.command([sys.executable, str(self.script), "--install"], timeout=INSTALL_TIMEOUT,
                                           log=self.log)  # fmt: skip
                self._problem = "" if done.ok else (
                    f"cannot install the conformance suite ({done.last_line()}); `make conformance` installs it "
                    f"(Node 22 and the suite from npm); see {self.log}")  # fmt: skip
            return self._problem

    def run(self, url: str, *, junit: Path, timeout: float, log: Path) -> SuiteResult:
        """The required profile against `url`, judged by the script's JUnit."""
        problem = self.ready()
        if problem:
            return SuiteResult(suite=Suite.CONFORMANCE, outcome=Outcome.ERROR, message=problem)
        junit.unlink(missing_ok=True)
        started = time.monotonic()
        done = self.processes.command([sys.executable, str(self.script), "--url", url, "--junit", str(junit)],
                                   timeout=timeout, log=log)  # fmt: skip
        text = junit.read_text(encoding="utf-8", errors="replace") if junit.exists() else ""
        attempt = Attempt(returncode=done.returncode, output=done.output, junit=text, timeout=timeout,
                          duration=time.monotonic() - started, timed_out=done.timed_out,
                          killed_by=done.signal, usage=done.usage)  # fmt: skip
        return judge(Suite.CONFORMANCE, attempt)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, deadline: float = READY_DEADLINE) -> bool:
    """Whether the server at `url` answers server/discover with 200 before the deadline."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}  # fmt: skip
    until = time.monotonic() + deadline
    while time.monotonic() < until:
        with contextlib.suppress(OSError, urllib.error.URLError):
            request = urllib.request.Request(url, data=DISCOVER, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    return True
        time.sleep(0.2)
    return False


class Relay:
    """Connections to this host's loopback (`port`) forwarded to `target`, both ways, once `start`ed: the
    port is known before the server it leads to is started."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._target: tuple[str, int] = ("", 0)

    def start(self, target: tuple[str, int]) -> None:
        self._target = target
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self.listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            if not select.select([self.listener], [], [], 0.2)[0]:
                continue
            client, _ = self.listener.accept()
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            threading.Thread(target=_connect, args=(client, upstream), daemon=True).start()


def _connect(client: socket.socket, upstream: socket.socket) -> None:
    """Both directions until each side has finished sending, then both sockets closed."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@dataclass(frozen=True, kw_only=True)
class Published:
    container: str
    port: int  # on the engine's side


def server_args(port: int, origin_port: int) -> tuple[str, ...]:
    """everything.py on 0.0.0.0:port, no token, accepting only the loopback names the suite will use."""
    return ("--http", "--host", "0.0.0.0", "--port", str(port), "--insecure-no-auth", "--log-level", "warning",
            "--allow-host", "localhost", "--allow-host", "127.0.0.1",
            "--allow-origin", f"http://127.0.0.1:{origin_port}", "--allow-origin", f"http://localhost:{origin_port}",
            EVERYTHING_IN_IMAGE)  # fmt: skip


def start_in_container(engine: Engine, image: str, *, name: str, run_id: str, address: str, origin_port: int | None,
                       log: Path) -> Published | None:  # fmt: skip
    """The runtime image serving everything.py, its port published on `address`; None when it never
    answered (its log is appended to `log`). origin_port None: the suite reaches the published port itself."""
    for _ in range(START_TRIES):
        port = free_port(address) if address.startswith("127.") else free_port()
        spec = ContainerSpec(image=image, name=name, network="bridge", labels={LABEL: "1", RUN_LABEL: run_id},
                             publish=(f"{address}:{port}:{port}",),
                             args=server_args(port, origin_port or port))  # fmt: skip
        started = engine.start(spec)
        if started.ok:
            return Published(container=name, port=port)
        engine.remove_containers(name)
        if "allocated" not in started.output and "in use" not in started.output:
            break
    with open(log, "a", encoding="utf-8") as sink:
        sink.write(f"mcplab: could not start {image}: {started.output}\n")
    return None


def run_against_container(engine: Engine, tool: ConformanceTool, *, image: str, run_id: str, cell: str,
                          timeout: float, logdir: Path, workdir: Path) -> SuiteResult:  # fmt: skip
    log = logdir / f"{cell}-conformance.log"
    name = f"mcplab-{run_id}-{cell}-conformance"
    address = engine.published_address()
    # The suite's dns-rebinding scenario needs a loopback URL: an engine elsewhere is reached by a relay.
    forward = Relay() if address != "127.0.0.1" else None
    try:
        origin_port = forward.port if forward else None
        published = start_in_container(engine, image, name=name, run_id=run_id, address=address,
                                       origin_port=origin_port, log=log)  # fmt: skip
        if published is None:
            return _no_server(f"the runtime image did not start serving everything.py; see {log}")
        if forward is not None:
            forward.start((address, published.port))
        url = f"http://127.0.0.1:{origin_port or published.port}/mcp"
        if not wait_ready(url):
            _append(log, f"mcplab: {url} never answered server/discover; the server's log:\n{engine.logs(name)}")
            return _no_server(f"everything.py in the runtime image never answered at {url}; see {log}")
        result = tool.run(url, junit=workdir / f"{cell}-conformance.xml", timeout=timeout, log=log)
        if result.outcome is not Outcome.PASSED:
            _append(log, f"mcplab: the server's log:\n{engine.logs(name)}")
        return result
    finally:
        if forward is not None:
            forward.close()
        engine.remove_containers(name)


def _no_server(message: str) -> SuiteResult:
    return SuiteResult(suite=Suite.CONFORMANCE, outcome=Outcome.ERROR, message=message)


def _append(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8") as sink:
        sink.write(text + "\n")


BANNER = re.compile(r" at (http://\S+)")


def run_against_host(processes: Processes, tool: ConformanceTool, *, python: Path, everything: Path, cell: str,
                     env: dict[str, str], timeout: float, logdir: Path, workdir: Path) -> SuiteResult:  # fmt: skip
    """The cell's venv python serving everything.py on loopback, as `make conformance` serves it."""
    log = logdir / f"{cell}-conformance.log"
    proc = processes.spawn([str(python), "-m", "mcpserver", "--http", "--port", "0", "--log-level", "warning",
                         str(everything)], env=env)  # fmt: skip
    try:
        assert proc.stderr is not None
        banner = b""
        if select.select([proc.stderr], [], [], READY_DEADLINE)[0]:
            banner = proc.stderr.readline()
        found = BANNER.search(banner.decode("utf-8", "replace"))
        if found is None:
            _append(log, f"mcplab: the server did not start: {banner!r}")
            return _no_server(f"{python} -m mcpserver --http did not start; see {log}")
        return tool.run(found.group(1), junit=workdir / f"{cell}-conformance.xml", timeout=timeout, log=log)
    finally:
        processes.finish(proc)
