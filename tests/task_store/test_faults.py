"""The faults a deployment meets (issue 50, item 4), each with real components: a PostgreSQL server restarted while
tasks run and listeners wait; a full disk under the SQLite store; a replica killed with SIGKILL in the middle of a
streamed answer, its client resuming on another; the clock stepped back and forward across a task's lease and across
the expiry of a requestState and of a legacy session id. For each: a clear error where one is due, no hang, and after
it every task, result and notification the documented guarantees cover (docs/guides/sessions.md, docs/guides/tasks.md).

The clock is stepped with Debian's libfaketime, preloaded into the server process alone (FAKETIME_TIMESTAMP_FILE, read
at every call; FAKETIME_DONT_FAKE_MONOTONIC): the server's wall clock jumps as a host's does when NTP or an operator
steps it, its monotonic clock runs on, and the machine's own clock is untouched. A seam in the server (a clock a test
can shift) would reach only the code that reads it: SQLite's own now(), the standard library and the interpreter read
the real clock, and a step reaches them all. One flaw of Debian's libfaketime 0.9.10 to know: with the monotonic clock
left real, its clock_nanosleep fails (EINVAL), so time.sleep raises in a process it is preloaded into; these tests'
paths through the server do not sleep (make soak's fault mode keeps its stepped replicas apart for that reason).

Two replicas on two hosts are two PID namespaces here (a task's runner is told apart by host and PID namespace), so
one cannot see whether the other's process lives and must go by its lease."""

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest
from mcptest import ROOT, HttpServer, call, fill_file_system, request
from test_bus import Listen
from test_replicas import resume_until_final

sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
from legacy_http import LegacySession

FAULT_TOOLS = os.path.join(ROOT, "tests", "fault_tools.py")
TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {**request("x")["params"]["_meta"],
              "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
KEY = {"MCPSERVER_STATE_KEY": "faults-" + "k" * 40}
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
# The replicas' task lease (--task-lease): a runner renews every third of it, and others sweep as often. Short, so
# the waits across it take seconds, not the default's minutes; long enough that a loaded machine's stall of a
# renewal (two of them in a row, 4 s) is not what a test sees.
LEASE_SECONDS = 6
LEASE = ("--task-lease", str(LEASE_SECONDS))


def ok(server, message, connection=None):
    status, _, body = server.post(message, connection=connection)
    assert status == 200 and "result" in body, (status, body)
    return body["result"]


def start_task(server, seconds):
    return ok(server, request("tools/call", meta=WITH_TASKS, name="wait", arguments={"seconds": seconds}))["taskId"]


def task(server, task_id):
    return ok(server, request("tasks/get", meta=WITH_TASKS, taskId=task_id))


def until_finished(server, task_id, seconds):
    """The task once it is no longer working, polled as a client does; fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        record = task(server, task_id)
        if record["status"] != "working" or time.monotonic() > deadline:
            return record
        time.sleep(0.2)


# --- PostgreSQL restarted ---------------------------------------------------------------------------------------


def test_postgresql_restarted_while_tasks_run_and_listeners_wait():
    from pgserver import PostgresServer

    database = PostgresServer()
    database.start()
    try:
        with HttpServer(FAULT_TOOLS, "--task-store", database.dsn, env=KEY) as one, \
                HttpServer(FAULT_TOOLS, "--task-store", database.dsn, env=KEY) as other:
            running = start_task(one, 6)
            done_before = start_task(one, 0.1)
            assert until_finished(one, done_before, 30)["status"] == "completed"
            follower = Listen(other, "follow", meta=WITH_TASKS, connection=other.connection(60), taskIds=[running])
            watcher = Listen(other, "watch", connection=other.connection(60), resourceSubscriptions=["res://after"])
            database.restart(down_seconds=2)
            # While it was down, and now: no hang. Once it is back, each part of the deployment works again.
            assert until_finished(other, running, 60)["status"] == "completed"
            assert task(one, done_before)["status"] == "completed"  # a result saved before the restart is kept
            heard = follower.heard(lambda note: note["params"].get("status") != "working")
            assert heard[-1]["params"]["status"] == "completed", heard
            ok(one, call("touch", uri="res://after"))  # the bus is heard again: a change published after it is back
            heard = watcher.heard(lambda note: note["params"].get("uri") == "res://after", 30)  # reaches the other
            follower.close()
            watcher.close()
            assert one.stop() == 0 and other.stop() == 0, one.stderr + other.stderr
    finally:
        database.stop()


# --- a full disk ------------------------------------------------------------------------------------------------


def can_mount() -> str:
    if os.geteuid() != 0:
        return "mounting a small file system needs root"
    return ""


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB tmpfs: a disk that fills."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.skipif(bool(can_mount()), reason=can_mount() or "")
def test_a_full_disk_under_the_sqlite_store_is_a_clear_error_and_nothing_is_corrupt_when_space_returns(small_disk):
    store = str(small_disk / "tasks.db")
    with HttpServer(FAULT_TOOLS, "--task-store", store, env=KEY) as server:
        kept = start_task(server, 0.1)
        assert until_finished(server, kept, 30)["status"] == "completed"
        running = start_task(server, 3)
        filler = fill_file_system(small_disk)
        started = time.monotonic()
        status, _, body = server.post(request("tools/call", meta=WITH_TASKS, name="wait", arguments={"seconds": 0}))
        assert time.monotonic() - started < 30
        assert status in (200, 500, 503) and "error" in body, (status, body)  # a new task cannot be stored: said
        assert "full" in body["error"]["message"].lower() or "space" in body["error"]["message"].lower(), body
        time.sleep(4)  # the running task finishes while the disk is full
        os.unlink(filler)
        assert until_finished(server, running, 60)["status"] == "completed"  # its result, saved once there is room
        assert task(server, kept)["status"] == "completed"
        again = start_task(server, 0.1)
        assert until_finished(server, again, 30)["status"] == "completed"
        assert server.stop() == 0, server.stderr
    with contextlib.closing(sqlite3.connect(store)) as database:  # `with` alone commits; 3.13 warns of it left open
        assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --- a replica killed mid-stream --------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def store_spec(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "tasks.db")
    return request.getfixturevalue("database")


def test_a_replica_killed_mid_stream_leaves_the_client_an_end_on_the_other(store_spec):
    """A legacy session's call is streaming its progress on one replica, which is killed (SIGKILL); the client
    resumes on the other with Last-Event-ID. What the first had stored is replayed, each once and in order, and the
    stream then ends with an error for the call (its process is gone) instead of waiting for ever."""
    with HttpServer(FAULT_TOOLS, "--task-store", store_spec, *LEASE, env=KEY) as one, \
            HttpServer(FAULT_TOOLS, "--task-store", store_spec, *LEASE, env=KEY) as other:
        session = LegacySession(one)
        message = {"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call", "params": {
            "name": "count", "arguments": {"to": 100, "delay": 0.05}, "_meta": {"progressToken": "p"}}}
        stream = session.open("POST", message)
        last = stream.next(skip_priming=False).id
        seen = []
        for _ in range(5):
            event = stream.next("notifications/progress")
            seen.append(event.message["params"]["progress"])
            last = event.id
        one.process.kill()
        one.process.wait()
        stream.drop()
        session.server = other
        time.sleep(1.2)  # the retry: the server sent
        started = time.monotonic()
        events = [event.message for event in resume_until_final(session, last)[0]]
        assert time.monotonic() - started < 60, "the end of the call took over 60 s"
        progress = [m["params"]["progress"] for m in events if m.get("method") == "notifications/progress"]
        assert seen + progress == list(range(1, len(seen) + len(progress) + 1)), (seen, progress)  # once, in order
        assert events[-1]["id"] == message["id"] and "error" in events[-1], events[-1]
        assert other.stop() == 0, other.stderr


def test_a_replica_killed_mid_task_leaves_it_failed_for_the_other_and_its_listener(store_spec):
    with HttpServer(FAULT_TOOLS, "--task-store", store_spec, *LEASE, env=KEY) as one, \
            HttpServer(FAULT_TOOLS, "--task-store", store_spec, *LEASE, env=KEY) as other:
        task_id = start_task(one, 30)
        follower = Listen(other, "follow", meta=WITH_TASKS, connection=other.connection(60), taskIds=[task_id])
        one.process.kill()
        one.process.wait()
        heard = follower.heard(lambda note: note["params"].get("status") != "working")
        assert heard[-1]["params"]["status"] == "failed", heard
        assert f"pid {one.process.pid}" in task(other, task_id)["statusMessage"]
        follower.close()
        assert other.stop() == 0, other.stderr


# --- the clock stepped ------------------------------------------------------------------------------------------


def can_step_clocks() -> str:
    if not os.path.exists(FAKETIME):
        return f"libfaketime is not installed ({FAKETIME}; Debian's libfaketime package)"
    if not shutil.which("unshare") or subprocess.run(["unshare", "--pid", "--fork", "true"],
                                                     capture_output=True).returncode:
        return "cannot make a PID namespace here (a second host, for the lease)"
    return ""


class Clock:
    """The wall clock of the processes started with env(): stepped by writing an offset to a file libfaketime reads
    at every call."""

    def __init__(self, folder):
        self.path = folder / f"clock-{uuid.uuid4().hex[:8]}"
        self.path.write_text("+0\n")

    def env(self):
        return {"LD_PRELOAD": FAKETIME, "FAKETIME_TIMESTAMP_FILE": str(self.path), "FAKETIME_NO_CACHE": "1",
                "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    def step(self, seconds):
        self.path.write_text(f"{seconds:+d}s\n")


def replica(store, clock, host):
    """A server on a host of its own (a PID namespace), its wall clock `clock`'s."""
    wrap = ("unshare", "--pid", "--kill-child", "--mount-proc") if host else ()
    return HttpServer(FAULT_TOOLS, "--task-store", store, *LEASE, env={**KEY, **clock.env(), "MCPSERVER_NO_INIT": "1"},
                      wrap=wrap)


@pytest.mark.skipif(bool(can_step_clocks()), reason=can_step_clocks() or "")
@pytest.mark.parametrize("where", ["forward-on-the-sweeper", "back-on-the-runner"])
def test_a_clock_step_across_a_lease_fails_no_task_that_still_runs(store_spec, tmp_path, where):
    """A task runs on one host; the other host sweeps for tasks whose runner is gone, by their leases. A step of
    twice the lease, forward on the sweeping host or back on the running one, must not make the running task look
    orphaned: it completes."""
    runner_clock, sweeper_clock = Clock(tmp_path), Clock(tmp_path)
    with replica(store_spec, runner_clock, True) as runner, replica(store_spec, sweeper_clock, False) as sweeper:
        task_id = start_task(runner, 2 * LEASE_SECONDS)
        (sweeper_clock if where.startswith("forward") else runner_clock).step(
            2 * LEASE_SECONDS if where.startswith("forward") else -2 * LEASE_SECONDS)
        record = until_finished(sweeper, task_id, 3 * LEASE_SECONDS)
        assert record["status"] == "completed", record
        assert record["result"]["content"][0]["text"] == f"waited {2 * LEASE_SECONDS}"
        assert sweeper.stop() == 0, sweeper.stderr


@pytest.mark.skipif(bool(can_step_clocks()), reason=can_step_clocks() or "")
def test_a_clock_step_across_a_request_states_expiry_is_a_clear_refusal_forward_and_none_back(tmp_path):
    from mcpserver._state import DEFAULT_STATE_TTL

    interactive = os.path.join(ROOT, "server", "examples", "interactive.py")
    clock = Clock(tmp_path)
    with HttpServer(interactive, env={**KEY, **clock.env()}) as server:
        meta = dict(request("x")["params"]["_meta"],
                    **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})

        def round_trip(state):
            answers = {"where": {"action": "accept", "content": {"city": "Oslo"}}}
            status, _, body = server.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "_meta": meta, "name": "trip_plan", "arguments": {}, "inputResponses": answers, "requestState": state}})
            assert status == 200, body
            return body

        def first():
            return ok(server, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"_meta": meta, "name": "trip_plan", "arguments": {}}})["requestState"]

        state = first()
        clock.step(-int(DEFAULT_STATE_TTL) - 60)  # back past its making: still good
        assert "result" in round_trip(state), "a state refused after a step back"
        state = first()  # sealed on the stepped-back clock
        clock.step(0)  # forward again, across its expiry as that clock saw it
        clock.step(int(DEFAULT_STATE_TTL) + 60)
        refused = round_trip(state)
        assert refused["error"]["code"] == -32602 and refused["error"]["data"] == {"reason": "invalid_request_state"}
        assert "expired" in refused["error"]["message"], refused
        assert "result" in round_trip(first())  # and a new one works on the new clock
        assert server.stop() == 0, server.stderr


@pytest.mark.skipif(bool(can_step_clocks()), reason=can_step_clocks() or "")
def test_a_clock_step_across_a_legacy_session_ids_expiry(tmp_path):
    from mcpserver.legacy._sessions import DEFAULT_SESSION_TTL

    clock = Clock(tmp_path)
    with HttpServer(FAULT_TOOLS, env={**KEY, **clock.env()}) as server:
        session = LegacySession(server)
        clock.step(-int(DEFAULT_SESSION_TTL) - 60)
        assert session.call("touch", uri="res://a")["content"][0]["text"] == "touched res://a"
        clock.step(int(DEFAULT_SESSION_TTL) + 60)
        status, _, _ = session.post({"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/list"})
        assert status == 404  # expired: the client starts a new session, as the revision says
        fresh = LegacySession(server)
        assert fresh.call("touch", uri="res://b")["content"][0]["text"] == "touched res://b"
        assert server.stop() == 0, server.stderr
