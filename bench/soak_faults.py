"""make soak SOAK_FAULTS=1 (bench/soak.py --faults): the faults of issue 50 injected at random while the load runs.

The faults go to targets of their own beside the soak's two loaded servers, so that those servers' RSS curve stays
the one the rule judges: a stop signal at a random moment of a spare server's start (as PID 1 of a PID namespace when
this runs as root); SIGTERM to a server holding listen streams, half of their clients gone (gunicorn's gthread and
sync workers, and our own server); a fork while a lock of the package is held (tests/task_store/fork_probe.py, one
lock drawn at random); and, on a pair of replicas sharing a store (PostgreSQL when Debian's postgresql is installed,
else an SQLite file), the store's server restarted, a replica killed with SIGKILL mid-stream and started again, and
the wall clock of one replica stepped across the lease (libfaketime); a full disk under an SQLite store on a small
tmpfs (as root). Each injection is followed by its check: what must hold once the fault is over (the documented
guarantees: docs/guides/sessions.md, docs/guides/tasks.md). An injection whose check fails is a fault not recovered.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Optional

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path[:0] = [os.path.join(ROOT, "tests", folder) for folder in ("", "http", "task_store")]

from legacy_http import LegacySession  # noqa: E402
from mcptest import GUNICORN, HAS_GUNICORN, HttpServer, fill_file_system, free_port, mcp_headers, raw_post, request  # noqa: E402

FAULT_TOOLS = os.path.join(ROOT, "tests", "fault_tools.py")
FORK_PROBE = os.path.join(ROOT, "tests", "task_store", "fork_probe.py")
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
TASKS = {**request("x")["params"]["_meta"],
         "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
KEY = {"MCPSERVER_STATE_KEY": "soak-faults-" + "k" * 40}
STOP_BOUND = 5.0  # seconds a server told to stop may take, streams held or not (issue 50, item 2)
LEASE_SECONDS = 30


class Outcome:
    def __init__(self, kind: str, at: float):
        self.kind, self.at = kind, at
        self.recovered = False
        self.seconds = 0.0
        self.detail = ""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "at": round(self.at, 1), "recovered": self.recovered,
                "seconds": round(self.seconds, 2), "detail": self.detail[:500]}


def _can_unshare() -> bool:
    return bool(shutil.which("unshare")) and subprocess.run(
        ["unshare", "--pid", "--fork", "true"], capture_output=True).returncode == 0


def ok(server: HttpServer, message: dict[str, Any]) -> dict[str, Any]:
    status, _, body = server.post(message)
    if status != 200 or not isinstance(body, dict) or "result" not in body:
        raise AssertionError(f"{message['method']}: {status} {body!r:.300}")
    return dict(body["result"])


def start_task(server: HttpServer, seconds: float) -> str:
    return str(ok(server, request("tools/call", meta=TASKS, name="wait", arguments={"seconds": seconds}))["taskId"])


def finished(server: HttpServer, task_id: str, seconds: float) -> dict[str, Any]:
    """The task once no longer working, polled through errors (the fault may still be settling) for `seconds`."""
    deadline, last = time.monotonic() + seconds, "never read"
    while time.monotonic() < deadline:
        try:
            record = ok(server, request("tasks/get", meta=TASKS, taskId=task_id))
            if record["status"] != "working":
                return record
            last = "working"
        except (AssertionError, OSError) as exc:
            last = str(exc)
        time.sleep(0.25)
    raise AssertionError(f"task {task_id} not finished after {seconds:g} s: {last}")


class Clock:
    """A wall clock libfaketime reads from a file at every call: stepped by writing an offset."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, f"clock-{random.getrandbits(32):08x}")
        self.offset = 0
        self.step(0)

    def env(self) -> dict[str, str]:
        if not os.path.exists(FAKETIME):
            return {}
        return {"LD_PRELOAD": FAKETIME, "FAKETIME_TIMESTAMP_FILE": self.path, "FAKETIME_NO_CACHE": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    def step(self, seconds: int) -> None:
        self.offset += seconds
        with open(self.path, "w", encoding="utf-8") as file:
            file.write(f"{self.offset:+d}s\n")


class Targets:
    """What the faults are injected into: a PostgreSQL server (or an SQLite file), and two pairs of replicas on it:
    one whose replicas are killed and started again, and one whose wall clocks are stepped (libfaketime preloaded:
    its clock_nanosleep fails with EINVAL when the monotonic clock is left real, as in Debian's 0.9.10, so a
    stepped replica's time.sleep raises, which the other faults must not meet)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="mcpserver-soak-faults-")
        self.database: Any = None
        try:
            from pgserver import PostgresServer, bindir

            if bindir() is not None:
                self.database = PostgresServer().start()
        except Exception as exc:  # no PostgreSQL here: the pair shares an SQLite file instead, and says so
            print(f"soak faults: no PostgreSQL ({exc}); the replicas share an SQLite file", flush=True)
            self.database = None
        self.store = self.database.dsn if self.database is not None else os.path.join(self.folder, "tasks.db")
        self.clocks = [Clock(self.folder), Clock(self.folder)]
        self.hosts = _can_unshare()
        self.replicas: list[Optional[HttpServer]] = [None, None]
        for index in (0, 1):
            self.restart(index)
        self.clocked = [self._replica(index, self.clocks[index].env()) for index in (0, 1)] \
            if os.path.exists(FAKETIME) else []

    def _replica(self, index: int, env: dict[str, str]) -> HttpServer:
        """A replica: the second of a pair on a host of its own (a PID namespace) when one can be made."""
        wrap: tuple[str, ...] = ("unshare", "--pid", "--kill-child", "--mount-proc") if index and self.hosts else ()
        return HttpServer(FAULT_TOOLS, "--task-store", self.store, "--log-level", "warning",
                          env={**KEY, **env, "MCPSERVER_NO_INIT": "1"}, wrap=wrap)

    def restart(self, index: int) -> HttpServer:
        """Replica `index` of the pair that is killed (again)."""
        self.replicas[index] = replica = self._replica(index, {})
        return replica

    def server_pid(self, index: int) -> int:
        """The replica's server process (under unshare: the namespace's PID 1, which is the server itself)."""
        replica = self.replicas[index]
        assert replica is not None
        pid = replica.process.pid
        if index and self.hosts:
            with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as children:
                return int(children.read().split()[0])
        return pid

    def close(self) -> None:
        for replica in [*self.replicas, *self.clocked]:
            if replica is not None and replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait()
        if self.database is not None:
            self.database.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


# --- the injections: each returns what it saw; raising AssertionError is a fault not recovered ------------------


def stop_while_starting(targets: Targets, rng: random.Random) -> str:
    """SIGTERM at a random moment of a spare server's start: it exits 0, and within the bound. Started as the lab's
    images and docs/guides/embedding.md's recipe start it, through `env --block-signal=TERM,INT`: before the server's
    first line a stop is the interpreter's (thrown away as PID 1, the default action else), which only a signal
    mask set before Python starts closes (where GNU env is not there, the bare interpreter)."""
    http = rng.random() < 0.5
    argv = [sys.executable, "-m", "mcpserver", *(["--http", "--port", "0"] if http else []), FAULT_TOOLS]
    if subprocess.run(["env", "--block-signal=TERM", "true"], capture_output=True).returncode == 0:
        argv = ["env", "--block-signal=TERM,INT", *argv]
    pid1 = targets.hosts and rng.random() < 0.5
    if pid1:
        argv = ["unshare", "--pid", "--kill-child", "--mount-proc", *argv]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"), **({"MCPSERVER_TOKEN": "t"} if http else {}))
    delay = rng.uniform(0, 0.3)
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        time.sleep(delay)
        target = process.pid
        if pid1:  # docker stop signals PID 1: the namespace's, unshare's child, once there is one
            deadline = time.monotonic() + 5
            while True:
                with open(f"/proc/{process.pid}/task/{process.pid}/children", encoding="ascii") as children:
                    listed = children.read().split()
                if listed:
                    target = int(listed[0])
                    break
                assert time.monotonic() < deadline, "the PID namespace never had its PID 1"
                time.sleep(0.001)
        signalled = time.monotonic()
        os.kill(target, signal.SIGTERM)
        code = process.wait(15)
        took = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()  # type: ignore[union-attr]
        stderr = process.stderr.read().decode(errors="replace")  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]
    where = f"{'http' if http else 'stdio'}{' as PID 1' if pid1 else ''}, {delay * 1000:.0f} ms in"
    assert code == 0 and "Traceback" not in stderr, f"{where}: exit {code}: {stderr[-300:]}"
    assert took < STOP_BOUND, f"{where}: {took:.1f} s to stop"
    return f"{where}: exit 0 in {took:.2f} s"


def stop_with_streams(targets: Targets, rng: random.Random) -> str:
    """SIGTERM to a server holding listen streams, half of their clients gone: it stops within the bound, and each
    stream still connected ends with its response."""
    kinds = ["ours"] + (["gthread", "sync"] if HAS_GUNICORN else [])
    kind, streams = rng.choice(kinds), rng.choice([1, 4, 10])
    port = free_port()
    app = f"mcpserver.http:create_app({FAULT_TOOLS!r})"
    argv = {"ours": [sys.executable, "-m", "mcpserver", "--http", "--port", str(port), "--log-level", "warning",
                     FAULT_TOOLS],
            "gthread": [GUNICORN, "-b", f"127.0.0.1:{port}", "-k", "gthread", "--threads", str(streams + 2), app],
            "sync": [GUNICORN, "-b", f"127.0.0.1:{port}", "-k", "sync", "-w", str(streams + 1), "--preload", app]}[kind]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "server"))
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=env)
    sockets: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, f"{kind} did not start"
                time.sleep(0.05)
        for n in range(streams):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(raw_post(request("subscriptions/listen", f"l{n}", notifications={"toolsListChanged": True})))
            received = b""
            while b"acknowledged" not in received:
                data = sock.recv(65536)
                assert data, f"{kind}: a listen stream ended before its acknowledgement"
                received += data
            sockets.append(sock)
        gone = sockets[: (streams + 1) // 2]
        for sock in gone:
            sock.close()
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        ended = 0
        for sock in sockets[len(gone):]:
            rest = b""
            try:
                while True:
                    data = sock.recv(65536)
                    if not data:
                        break
                    rest += data
            except OSError:
                pass
            ended += b'"result"' in rest
        code = process.wait(60)
        took = time.monotonic() - signalled
    finally:
        for sock in sockets:
            sock.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    where = f"{kind} with {streams} streams ({len(gone)} gone)"
    assert code == 0, f"{where}: exit {code}"
    assert took < STOP_BOUND, f"{where}: {took:.1f} s to stop (the bound is {STOP_BOUND:g} s)"
    assert ended == streams - len(gone), f"{where}: {ended} of {streams - len(gone)} live streams got their end"
    return f"{where}: stopped in {took:.2f} s, every live stream ended with its response"


def fork_with_a_lock_held(targets: Targets, rng: random.Random) -> str:
    """A fork while one lock of the package, drawn at random, is held by another thread: the child serves."""
    folder = tempfile.mkdtemp(dir=targets.folder)
    store = os.path.join(folder, "tasks.db") if rng.random() < 0.5 or targets.database is None else targets.store
    os.mkdir(os.path.join(folder, "metrics"))
    done = subprocess.run([sys.executable, FORK_PROBE, store, os.path.join(folder, "metrics"),
                           str(rng.getrandbits(32))], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if ": " in line]
    assert done.returncode == 0, (lines[0] if lines else done.stderr[-300:])
    return lines[0] if lines else "ok"


def postgres_restart(targets: Targets, rng: random.Random) -> str:
    """The store's PostgreSQL restarted while a task runs and a listener waits on the other replica: the task
    completes, the listener hears a change published after, requests work again at once."""
    assert targets.database is not None, "no PostgreSQL"
    one, other = targets.replicas
    assert one is not None and other is not None
    task_id = start_task(one, 3)
    down = rng.uniform(0.5, 3)
    targets.database.restart(down_seconds=down)
    ok(other, request("tasks/get", meta=TASKS, taskId=task_id))  # the first request after: no stale connection
    record = finished(other, task_id, 60)
    assert record["status"] == "completed", record
    uri = f"res://after-{rng.getrandbits(32):x}"
    listener = _Listen(other, uri)
    try:
        ok(one, request("tools/call", name="touch", arguments={"uri": uri}))
        listener.heard(uri, 30)
    finally:
        listener.close()
    return f"down {down:.1f} s: the task completed, the bus carried a change across"


def replica_killed(targets: Targets, rng: random.Random) -> str:
    """A replica killed (SIGKILL) mid-stream; the client resumes on the other: what was stored is replayed, and the
    call ends (with its error: its process is gone) instead of hanging. The replica is started again."""
    index = rng.randrange(2)
    victim, survivor = targets.replicas[index], targets.replicas[1 - index]
    assert victim is not None and survivor is not None
    session = LegacySession(victim)
    message = {"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call",
               "params": {"name": "count", "arguments": {"to": 200, "delay": 0.05}, "_meta": {"progressToken": "p"}}}
    stream = session.open("POST", message)
    opened = time.monotonic()
    last = stream.next(skip_priming=False).id
    for _ in range(rng.randrange(1, 40)):
        last = stream.next("notifications/progress").id
    os.kill(targets.server_pid(index), signal.SIGKILL)
    killed = time.monotonic() - opened
    victim.process.wait(10)
    stream.drop()
    session.server = survivor
    time.sleep(1.2)
    try:
        deadline, ended = time.monotonic() + 60, None  # the survivor calls it abandoned after 15 s standing still
        while ended is None and time.monotonic() < deadline:
            resumed = session.open(last_event_id=last)
            if resumed.status == 400 and killed < 1.0 and b"names no event" in resumed.response.read():
                resumed.drop()  # killed before its first batch reached the database: the documented lag
                return f"replica {index} killed {killed:.2f} s into the call, before its stream reached the " \
                       "database: 400 on resume (the documented lag; docs/guides/sessions.md)"
            assert resumed.status == 200, f"resume: {resumed.status} {resumed.response.read()[:300]!r}; the " \
                                          f"survivor's stderr: {survivor.stderr[-3000:]}"
            for event in resumed.events():
                last = event.id or last
                if isinstance(event.message, dict) and "id" in event.message:
                    ended = event.message
            resumed.drop()
            time.sleep(0.2)
        assert ended is not None, "the resumed call never ended: the client waits for ever"
    finally:
        targets.restart(index)
    return f"replica {index} killed {killed:.2f} s into the call; it ended on the other with " \
           f"{'an error' if 'error' in ended else 'its result'}"


def clock_step(targets: Targets, rng: random.Random) -> str:
    """One replica's wall clock stepped by twice the lease, forward or back, while a task runs on the other (or on
    it): the task completes, as it would have."""
    if not os.path.exists(FAKETIME):
        raise AssertionError("libfaketime is not installed")
    runner, stepped = rng.randrange(2), rng.randrange(2)
    seconds = rng.choice([-2, 2]) * LEASE_SECONDS
    task_id = start_task(targets.clocked[runner], LEASE_SECONDS + 5)
    targets.clocks[stepped].step(seconds)
    record = finished(targets.clocked[1 - runner], task_id, 3 * LEASE_SECONDS)
    assert record["status"] == "completed", f"stepped {seconds:+d} s on replica {stepped}: {record}"
    return f"replica {stepped} stepped {seconds:+d} s; the task on replica {runner} completed"


def full_disk(targets: Targets, rng: random.Random) -> str:
    """An SQLite store on a 64 MiB tmpfs, filled while a task runs: a new task is refused with a clear error, the
    running one's result is saved once room returns, and the database is whole."""
    if os.geteuid() != 0:
        raise AssertionError("mounting a small file system needs root")
    where = tempfile.mkdtemp(dir=targets.folder)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", where], check=True, capture_output=True)
    try:
        store = os.path.join(where, "tasks.db")
        with HttpServer(FAULT_TOOLS, "--task-store", store, "--log-level", "warning", env=KEY) as server:
            running = start_task(server, 2)
            filler = fill_file_system(where)
            status, _, body = server.post(request("tools/call", meta=TASKS, name="wait", arguments={"seconds": 0}))
            refused = isinstance(body, dict) and "error" in body
            time.sleep(rng.uniform(2, 4))
            os.unlink(filler)
            record = finished(server, running, 30)
            assert record["status"] == "completed", record
            finished(server, start_task(server, 0), 30)
            assert server.stop() == 0, server.stderr[-300:]
        with sqlite3.connect(store) as database:
            assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert refused, f"a task while the disk was full: {status} {body!r:.200}"
    finally:
        subprocess.run(["umount", "-l", where], capture_output=True)
    return "refused while full, the running task's result saved after, the database whole"


class _Listen:
    """A subscriptions/listen stream for one resource."""

    def __init__(self, server: HttpServer, uri: str):
        message = request("subscriptions/listen", "w", notifications={"resourceSubscriptions": [uri]})
        self.connection = server.connection(timeout=60)
        self.connection.request("POST", server.path, body=json.dumps(message).encode(),
                                headers=mcp_headers(message))
        self.response = self.connection.getresponse()
        assert self.response.status == 200
        self.heard("notifications/subscriptions/acknowledged", 30)

    def heard(self, what: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            line = self.response.readline()
            assert line, "the listen stream ended"
            if line.startswith(b"data: ") and what.encode() in line:
                return
        raise AssertionError(f"{what} not heard in {seconds:g} s")

    def close(self) -> None:
        self.connection.close()


INJECTIONS: dict[str, Callable[[Targets, random.Random], str]] = {
    "stop while starting": stop_while_starting,
    "SIGTERM with listen streams held": stop_with_streams,
    "fork with a lock held": fork_with_a_lock_held,
    "PostgreSQL restarted": postgres_restart,
    "replica killed mid-stream": replica_killed,
    "clock stepped across the lease": clock_step,
    "full disk under SQLite": full_disk,
}


class Faults:
    """Injects the faults, one at a time, each kind in turn in a shuffled order, one every `every` seconds on
    average, until stopped; records each outcome."""

    def __init__(self, every: float, seed: int, started: float):
        self.every, self.rng, self.started = every, random.Random(seed), started
        self.targets = Targets()
        self.kinds = [kind for kind in INJECTIONS if self._possible(kind)]
        self.outcomes: list[Outcome] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-faults", daemon=True)

    def _possible(self, kind: str) -> bool:
        if kind == "PostgreSQL restarted":
            return self.targets.database is not None
        if kind == "clock stepped across the lease":
            return os.path.exists(FAKETIME)
        if kind == "full disk under SQLite":
            return os.geteuid() == 0
        return True

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        order: list[str] = []
        while not self.stop.wait(self.rng.uniform(0.5, 1.5) * self.every):
            if not order:
                order = self.rng.sample(self.kinds, len(self.kinds))
            kind = order.pop()
            outcome = Outcome(kind, time.monotonic() - self.started)
            began = time.monotonic()
            try:
                outcome.detail = INJECTIONS[kind](self.targets, self.rng)
                outcome.recovered = True
            except Exception as exc:  # a fault not recovered: what happened, for the report
                outcome.detail = f"{type(exc).__name__}: {exc}"
            outcome.seconds = time.monotonic() - began
            self.outcomes.append(outcome)
            print(f"soak: fault {kind}: {'recovered' if outcome.recovered else 'NOT RECOVERED'} "
                  f"({outcome.seconds:.1f} s): {outcome.detail[:200]}", flush=True)

    def finish(self) -> list[dict[str, Any]]:
        self.stop.set()
        self.thread.join(600)
        self.targets.close()
        return [outcome.as_dict() for outcome in self.outcomes]

    def unavailable(self) -> list[str]:
        return [kind for kind in INJECTIONS if kind not in self.kinds]
