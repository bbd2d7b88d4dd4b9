"""The systems under test, and starting and stopping them.

Every Python process runs on the same interpreter, the one of .cache/bench-venv: the official SDK and
gunicorn are installed there; the ceilings and mcpserver (from server/, on PYTHONPATH) import nothing
from it, but start with the same (clean) site-packages, so no system pays for .pth files that a base
installation may carry and the others do not.
Nothing logs per request: mcpserver runs with --log-level warning over HTTP, uvicorn with its access
log off, gunicorn without one, the ceilings never log. One extra HTTP system keeps mcpserver's access
log on (its default) to show what the log costs.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import IO, Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
DEMO = os.path.join(ROOT, "server", "examples", "demo.py")
PROGRESS = os.path.join(BENCH, "progress_server.py")
_SERVING = re.compile(rb"http://127\.0\.0\.1:(\d+)/mcp")

# Keys of the systems; the report's tables and ratios name them.
BARE = "bare"
BARE_IMPORTS = "bare-imports"
OURS = "mcpserver"
OURS_UNCOMPILED = "mcpserver-uncompiled"  # the package without bytecode, started with -B (issue 36, item 4)
OURS_LEGACY = "mcpserver-legacy"  # mcpserver in an initialize-opened session: the instruction counts' legacy row
OURS_LOGGED = "mcpserver-log"
OURS_GUNICORN = "mcpserver-gunicorn"
OURS_WSGIREF = "mcpserver-wsgiref"
SDK = "sdk"
SDK_SESSIONS = "sdk-sessions"  # the official SDK's stateful HTTP app, for the legacy-era row
OURS_PROGRESS = "mcpserver-progress"  # bench/progress_server.py: echo, echo_ctx, steps
AUTH_SERVER = "authorization-server"  # the stand-in issuer for the OAuth run
AUTH_STATIC = "auth-static"
AUTH_OAUTH = "auth-oauth"


@dataclass(frozen=True)
class System:
    key: str
    label: str
    transport: str  # "stdio" or "http"
    argv: tuple[str, ...]  # "{port}" is replaced by a free port for HTTP systems that cannot pick one
    note: str = ""
    server_dir: str = ""  # where this system imports mcpserver from (empty: SERVER_DIR); bench/compare.py sets it


@dataclass
class Running:
    system: System
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    port: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


# Where mcpserver is imported from; run.py --server-dir points it at another checkout (before/after runs).
SERVER_DIR = os.path.join(ROOT, "server")


def environment(server_dir: str = "") -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env["PYTHONPATH"] = server_dir or SERVER_DIR
    return env


# What mcpserver's stdio start-up imports from the standard library, printed by the venv's interpreter.
_PROBE = """
import json, sys
base = set(sys.modules)
import mcpserver.__main__, mcpserver.stdio, mcpserver._loader
mcpserver._loader.load_target(sys.argv[1])
print(",".join(sorted(m for m in set(sys.modules) - base
                      if not m.startswith("mcpserver") and m.split(".")[0] in sys.stdlib_module_names)))
"""


def stdlib_imports(python: str) -> str:
    done = subprocess.run([python, "-c", _PROBE, DEMO], capture_output=True, text=True, env=environment(), check=True)
    return done.stdout.strip()


def cold_start_reference(python: str) -> System:
    """The bare loop after importing what mcpserver imports from the standard library."""
    return System(BARE_IMPORTS, "bare loop + mcpserver's stdlib imports", "stdio",
                  (python, os.path.join(BENCH, "ceiling_stdio.py"), "--imports", stdlib_imports(python)),
                  "reference: what importing mcpserver's standard-library modules alone costs")


def uncompiled_system(python: str, scratch: str) -> System:
    """mcpserver from a copy of the package with no bytecode, started with -B so none is written: what every start
    of a read-only copy, or of an image with PYTHONDONTWRITEBYTECODE=1 that shipped no .pyc files, pays."""
    import shutil

    folder = os.path.join(scratch, "uncompiled")
    if not os.path.isdir(folder):
        shutil.copytree(os.path.join(SERVER_DIR, "mcpserver"), os.path.join(folder, "mcpserver"),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return System(OURS_UNCOMPILED, "mcpserver, no bytecode", "stdio", (python, "-B", "-m", "mcpserver", DEMO),
                  "python -B -m mcpserver demo.py, from a copy without __pycache__", server_dir=folder)


def stdio_systems(python: str, venv_python: str) -> list[System]:
    return [
        System(BARE, "bare-stdlib loop", "stdio", (python, os.path.join(BENCH, "ceiling_stdio.py")),
               "json.loads, a dict, json.dumps, write, flush"),
        System(OURS, "mcpserver", "stdio", (python, "-m", "mcpserver", DEMO), "python -m mcpserver demo.py"),
        System(SDK, "official SDK", "stdio", (venv_python, os.path.join(BENCH, "sdk_server.py")),
               "mcp==2.3.0 MCPServer, stdio"),
    ]


def http_systems(python: str, venv_python: str) -> list[System]:
    gunicorn = os.path.join(os.path.dirname(venv_python), "gunicorn")
    return [
        System(BARE, "bare ThreadingHTTPServer", "http", (python, os.path.join(BENCH, "ceiling_http.py")),
               "http.server POST handler: json.loads, a dict, json.dumps"),
        System(OURS, "mcpserver", "http",
               (python, "-m", "mcpserver", "--http", "--port", "0", "--log-level", "warning", DEMO),
               "python -m mcpserver --http (stdlib threaded server), access log off"),
        System(OURS_LOGGED, "mcpserver, access log on", "http",
               (python, "-m", "mcpserver", "--http", "--port", "0", DEMO),
               "the same with its default --log-level info: one access-log line per request to stderr"),
        System(OURS_GUNICORN, "mcpserver on gunicorn -w 2", "http",
               (gunicorn, "-w", "2", "-b", "127.0.0.1:{port}", "--graceful-timeout", "3",
                f'mcpserver.http:create_app("{DEMO}")'),
               "gunicorn 2 sync workers serving mcpserver.http:create_app"),
        System(OURS_WSGIREF, "mcpserver on wsgiref", "http",
               (python, os.path.join(BENCH, "wsgiref_server.py"), DEMO, "{port}"),
               "reference: the WSGI app under wsgiref.simple_server (one request at a time, HTTP/1.0)"),
        System(SDK, "official SDK", "http", (venv_python, os.path.join(BENCH, "sdk_server.py"), "--http", "{port}"),
               "mcp==2.3.0 MCPServer streamable_http_app(stateless_http, json_response) on uvicorn"),
    ]


def legacy_stdio_systems(python: str, venv_python: str) -> list[System]:
    """mcpserver and the official SDK, each opened with an initialize handshake (measure.legacy_handshake)."""
    return [s for s in stdio_systems(python, venv_python) if s.key in (OURS, SDK)]


# mcpserver serves legacy sessions over Streamable HTTP from issue 25 item 4 on; until then its legacy HTTP
# row is not measured (True: measured beside the SDK's).
LEGACY_HTTP_SERVED = True


def legacy_http_systems(python: str, venv_python: str) -> list[System]:
    ours = [s for s in http_systems(python, venv_python) if s.key == OURS] if LEGACY_HTTP_SERVED else []
    return [*ours,
            System(SDK_SESSIONS, "official SDK, with sessions", "http",
                   (venv_python, os.path.join(BENCH, "sdk_server.py"), "--http-sessions", "{port}"),
                   "mcp==2.3.0 MCPServer streamable_http_app(json_response), stateful: an Mcp-Session-Id per "
                   "initialize")]


def progress_stdio(python: str) -> System:
    return System(OURS_PROGRESS, "mcpserver (bench/progress_server.py)", "stdio",
                  (python, "-m", "mcpserver", PROGRESS), "python -m mcpserver bench/progress_server.py")


def progress_http(python: str) -> System:
    return System(OURS_PROGRESS, "mcpserver (bench/progress_server.py)", "http",
                  (python, "-m", "mcpserver", "--http", "--port", "0", "--log-level", "warning", PROGRESS),
                  "python -m mcpserver --http bench/progress_server.py, access log off")


def ready_systems(python: str, venv_python: str) -> list[System]:
    """The HTTP servers whose start is timed: each told its port up front, as a user would."""
    return [
        System(BARE, "bare ThreadingHTTPServer", "http", (python, os.path.join(BENCH, "ceiling_http.py"), "{port}")),
        System(OURS, "mcpserver", "http", (python, "-m", "mcpserver", "--http", "--port", "{port}", "--log-level",
                                           "warning", DEMO)),
        System(SDK, "official SDK", "http", (venv_python, os.path.join(BENCH, "sdk_server.py"), "--http", "{port}")),
    ]


def authorization_server(python: str) -> System:
    return System(AUTH_SERVER, "stand-in authorization server", "http",
                  (python, os.path.join(BENCH, "auth_server.py"), "{port}"),
                  "RFC 8414 metadata and a JWKS with the RFC 7515 test keys; signs test tokens")


def auth_systems(python: str, token_file: str, issuer: str) -> list[System]:
    """mcpserver serving the demo with a static token, and with OAuth (JWTs from `issuer`)."""
    return [
        System(AUTH_STATIC, "mcpserver, static token", "http",
               (python, "-m", "mcpserver", "--http", "--port", "{port}", "--log-level", "warning", "--token-file",
                token_file, DEMO), "--token-file: one bearer token compared in constant time"),
        System(AUTH_OAUTH, "mcpserver, OAuth (JWT)", "http",
               (python, "-m", "mcpserver", "--http", "--port", "{port}", "--log-level", "warning", "--resource",
                "http://127.0.0.1:{port}/mcp", "--authorization-server", issuer, "--scope", "mcp:read", DEMO),
               "--resource/--authorization-server/--scope: JWT access tokens checked against the issuer's JWKS"),
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(system: System, log_dir: str, timeout: float = 60.0, wait_ready: bool = True) -> Running:
    """Start a server; for HTTP, return once it accepts connections (unless not `wait_ready`)."""
    os.makedirs(log_dir, exist_ok=True)
    log = open(os.path.join(log_dir, f"{system.transport}-{system.key}.log"), "ab")  # noqa: SIM115
    port = free_port() if any("{port}" in a for a in system.argv) else 0
    argv = [a.replace("{port}", str(port)) for a in system.argv]
    log.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(argv)}\n".encode())
    log.flush()
    stdin = subprocess.PIPE if system.transport == "stdio" else subprocess.DEVNULL
    stdout = subprocess.PIPE if system.transport == "stdio" else log
    process = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=log, cwd=ROOT,
                               env=environment(system.server_dir))
    running = Running(system, process, log, port)
    if system.transport == "http" and wait_ready:
        _wait_ready(running, timeout)
    return running


def _wait_ready(running: Running, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    offset = running.log.tell()
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            raise RuntimeError(f"{running.system.label} exited with {running.process.returncode} while starting; "
                               f"see {running.log.name}")
        if not running.port:
            with open(running.log.name, "rb") as log:
                log.seek(offset)
                found = _SERVING.search(log.read())
            if found:
                running.port = int(found.group(1))
        if running.port:
            try:
                socket.create_connection(("127.0.0.1", running.port), timeout=1).close()
                return
            except OSError:
                pass
        time.sleep(0.02)
    stop(running)
    raise RuntimeError(f"{running.system.label} did not start listening within {timeout:.0f} s; see {running.log.name}")


def stop(running: Running, timeout: float = 15.0) -> None:
    process = running.process
    if process.poll() is None:
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        else:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
    running.log.close()


def peak_rss_kib(pid: int) -> int:
    """VmHWM of a process plus its descendants (gunicorn: master and workers)."""
    total = 0
    for each in [pid, *_descendants(pid)]:
        try:
            with open(f"/proc/{each}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (all its threads) and its live descendants."""
    ticks = 0
    for each in [pid, *_descendants(pid)]:
        try:
            with open(f"/proc/{each}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, summed over its cores."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK"), idle / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    found = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            for child in children.read().split():
                found += [int(child), *_descendants(int(child))]
    except OSError:
        pass
    return found
