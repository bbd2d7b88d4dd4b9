"""SqliteTaskStore on real files: several processes on one file, a runner killed with SIGKILL, a restart,
files that are corrupt, read-only or on a full disk, and one client creating 10,000 tasks.

The full-disk tests: one uses SQLite's max_page_count (the store's max_bytes), which runs everywhere and
fails writes with the same SQLITE_FULL a full disk gives; one fills a real tmpfs it mounts, only as root
(skipped otherwise, saying so). The read-only test uses permissions, or as root (whom permissions do not
stop) a read-only bind mount."""

import os
import signal
import subprocess
import time

import pytest
from mcpserver.errors import ConfigError
from mcpserver.store import SqliteTaskStore, StoreFull, StoreUnavailable, TaskLimitReached
from mcpserver.store._sql_sessions import SqlSessionStore
from mcpserver.store._sqlite import APPLICATION_ID, SCHEMA_VERSION
from mcpserver.tasks import Tasks
from mcpserver.tasks._record import _process_start
from task_store_worker import StoreProcess, race_creates
from test_session_store import across_processes, contract
from test_task_store import RESULT, Clock, memory_grown

sqlite3 = pytest.importorskip("sqlite3", reason="this Python has no sqlite3 module (built without SQLite)")

ROOT = os.geteuid() == 0


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "tasks.db")


globals().update(contract())  # the session store's contract, on SQLite


@pytest.fixture
def make_sessions(path, request):
    return lambda **bounds: across_processes(lambda: SqliteTaskStore(path), request, **bounds)


def processes(*specs):
    return [StoreProcess(spec) for spec in specs]


def test_two_processes_share_one_file(path):
    runner, client = processes(path, path)
    try:
        task_id = runner.ok("create", "alice")["task_id"]
        assert client.ok("get", task_id, "alice")["status"] == "working"  # at once, from the other process
        runner.ok("need_input", task_id, {"q": {"method": "elicitation/create", "params": {}}})
        assert client.ok("get", task_id, "alice")["detailed"]["inputRequests"] == {
            "q": {"method": "elicitation/create", "params": {}}}
        client.ok("answer", task_id, "alice", {"q": {"action": "accept"}})
        assert client.ok("get", task_id, "alice")["status"] == "working"
        assert runner.ok("take_answers", task_id) == {"q": {"action": "accept"}}
        client.ok("request_cancel", task_id, "alice")
        assert runner.ok("cancel_requested", task_id) is True
        runner.ok("set_status", task_id, "cancelled")
        assert client.ok("get", task_id, "alice")["status"] == "cancelled"
        assert client.call("get", task_id, "mallory")["error"] == "TaskNotFound"
    finally:
        runner.close()
        client.close()


def test_processes_creating_at_once_never_pass_the_owners_limit_together(path):
    SqliteTaskStore(path).close()
    created = race_creates(path)
    assert sum(created) == 100, created  # 240 attempts, 100 allowed: count and insert are one transaction


def test_a_runner_killed_mid_run_reads_failed_even_before_it_is_reaped(path):
    runner = StoreProcess(path)
    task_id = runner.ok("create", "alice")["task_id"]
    runner.process.send_signal(signal.SIGKILL)
    if os.path.exists(f"/proc/{runner.pid}/stat"):
        deadline = time.monotonic() + 30
        while _process_start(runner.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)  # dead but not reaped by this process (its parent): a zombie, which os.kill(pid, 0) finds
    else:  # no /proc: the pid check alone
        runner.process.wait()
    with SqliteTaskStore(path) as opened:
        store = Tasks(opened)
        record = store.get(task_id, "alice")
    runner.process.wait()
    runner.close()
    assert record.status == "failed" and f"pid {runner.pid}" in record.status_message
    assert record.error["code"] == -32603 and "ended before the task finished" in record.error["message"]


def test_a_file_that_is_not_sqlite_is_refused_at_open(path):
    with open(path, "wb") as file:
        file.write(b"this is no database, it is a text file that happens to sit where the store should " * 64)
    with pytest.raises(ConfigError, match="is not an SQLite database or is damaged") as refused:
        SqliteTaskStore(path)
    assert path in str(refused.value)


def test_another_applications_database_and_another_schema_are_refused(path):
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE customers (name TEXT)")
    other.commit()
    other.close()
    with pytest.raises(ConfigError, match="another application"):
        SqliteTaskStore(path)
    os.remove(path)
    SqliteTaskStore(path).close()
    newer = sqlite3.connect(path)
    assert newer.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer.close()
    with pytest.raises(ConfigError, match=f"schema version {SCHEMA_VERSION + 1}; this mcpserver reads version 1"):
        SqliteTaskStore(path)


def test_a_damaged_file_is_refused_at_open(path):
    with SqliteTaskStore(path) as opened:
        store = Tasks(opened)
        for _ in range(300):
            store.finish(store.create("alice").task_id, result=RESULT)
    assert not os.path.exists(path + "-wal")  # the last connection's close checkpointed it into the file
    with open(path, "r+b") as file:
        file.seek(4096)  # pages 2 to 5: tables and indexes; page 1 (the header) intact
        file.write(bytes(range(256)) * 64)
    with pytest.raises(ConfigError, match="damaged"):
        SqliteTaskStore(path)


def read_only_view(tmp_path):
    """A directory holding a task store, as a read-only place: permissions, or a bind mount for root."""
    source = tmp_path / "store"
    source.mkdir()
    SqliteTaskStore(str(source / "tasks.db")).close()
    if not ROOT:
        os.chmod(source / "tasks.db", 0o444)
        os.chmod(source, 0o555)
        return source, lambda: os.chmod(source, 0o755)
    view = tmp_path / "view"
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True).returncode != 0:
        pytest.skip("as root, permissions do not stop writes, and this machine refuses a bind mount")
    subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True)
    return view, lambda: subprocess.run(["umount", str(view)], check=True)


def test_a_read_only_store_is_refused_at_open_saying_why(tmp_path):
    where, undo = read_only_view(tmp_path)
    try:
        with pytest.raises(ConfigError, match="cannot be written") as refused:
            SqliteTaskStore(str(where / "tasks.db"))
    finally:
        undo()
    assert "permissions" in str(refused.value) and "mount" in str(refused.value)


def fill_until_full(store, text):
    """Tasks created and finished (TTL 1 s) until the store refuses; how many were saved."""
    saved = 0
    while True:
        try:
            task_id = store.create("filler", ttl_ms=1000).task_id
        except StoreFull:
            return saved
        if store.finish(task_id, result={"content": [{"type": "text", "text": text}]}) is None:
            return saved
        saved += 1


def test_a_full_store_refuses_new_tasks_and_loses_no_result(path):
    clock = Clock()
    store = Tasks(SqliteTaskStore(path, max_bytes=512 * 1024, reserve_bytes=0, clock=clock))
    elsewhere = Tasks(SqliteTaskStore(path, clock=clock))  # another process's view
    try:
        victim = store.create("alice", ttl_ms=None).task_id
        early = store.create("alice", ttl_ms=None).task_id
        store.finish(early, result=RESULT)
        assert fill_until_full(store, "x" * 60_000) >= 3
        with pytest.raises(StoreFull) as refused:
            for _ in range(10_000):  # small tasks still fit in the last pages: until they do not
                store.create("filler", ttl_ms=1000)
        assert refused.value.code == -32603 and "full" in refused.value.message
        late = {"content": [{"type": "text", "text": "y" * 60_000}]}
        assert store.finish(victim, result=late) is None  # kept in memory: SQLite said the file is full
        assert store.get(victim, "alice").result == late  # this process shows it already
        assert elsewhere.get(victim, "alice").status == "working"  # the others, once it is saved
        assert elsewhere.get(early, "alice").result == RESULT  # nothing stored before was harmed
        clock.now += 2  # the fillers expire: sweeping them makes room
        assert store.sweep().expired >= 3
        store.heartbeat()
        assert elsewhere.get(victim, "alice").result == late
    finally:
        store.close()
        elsewhere.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    check.close()


def test_the_reserve_keeps_room_for_running_tasks_to_finish(path):
    store = Tasks(SqliteTaskStore(path, max_bytes=1024 * 1024, reserve_bytes=400 * 1024))
    try:
        running = [store.create("alice").task_id for _ in range(3)]
        fill_until_full(store, "x" * 60_000)
        with pytest.raises(StoreFull, match="keeps 409600 for running tasks' results"):
            store.create("alice")
        for task_id in running:  # refused new work, but the work already accepted saves its results
            saved = store.finish(task_id, result={"content": [{"type": "text", "text": "z" * 60_000}]})
            assert saved.status == "completed"
    finally:
        store.close()


@pytest.fixture
def tiny_disk(tmp_path):
    if not ROOT:
        pytest.skip("mounting a small tmpfs to fill needs root (the max_bytes test covers the same SQLITE_FULL path)")
    where = tmp_path / "tiny"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("this machine refuses to mount a tmpfs")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_real_full_disk(tiny_disk):
    path = str(tiny_disk / "tasks.db")
    store = Tasks(SqliteTaskStore(path, reserve_bytes=1024 * 1024))
    elsewhere = Tasks(SqliteTaskStore(path))
    try:
        victim = store.create("alice").task_id
        filler = tiny_disk / "filler"
        with open(filler, "wb") as file:
            try:
                while True:
                    file.write(b"\0" * 65536)
                    file.flush()
            except OSError:
                pass  # ENOSPC: the disk is full
        with pytest.raises(StoreFull, match="its disk has 0 MiB free"):
            store.create("alice")
        result = {"content": [{"type": "text", "text": "r" * 200_000}]}
        assert store.finish(victim, result=result) is None
        assert store.get(victim, "alice").result == result
        assert elsewhere.get(victim, "alice").status == "working"
        os.remove(filler)
        store.heartbeat()
        assert elsewhere.get(victim, "alice").result == result
    finally:
        store.close()
        elsewhere.close()


def test_writes_to_an_unwritable_store_raise_a_specific_error(path, monkeypatch):
    store = Tasks(SqliteTaskStore(path))
    try:
        task_id = store.create("alice").task_id

        def locked(*arguments):
            raise sqlite3.OperationalError("database is locked")

        connection = store.store._pool.acquire()
        store.store._pool.release(connection)
        monkeypatch.setattr(store.store._pool, "acquire", lambda: _Failing(connection, locked))
        with pytest.raises(StoreUnavailable) as refused:
            store.set_status(task_id, "working", "x")
        assert refused.value.code == -32603 and "database is locked" in refused.value.message
        assert path not in refused.value.message  # a client sees it: no file names
    finally:
        monkeypatch.undo()
        store.close()


class _Failing:
    def __init__(self, connection, fail):
        self.connection, self.fail, self.in_transaction = connection, fail, False

    def execute(self, sql, *arguments):
        return self.fail() if sql == "BEGIN IMMEDIATE" else self.connection.execute(sql, *arguments)

    def close(self):
        pass


def test_ten_thousand_tasks_from_one_client_meet_the_limit_in_bounded_memory_and_disk(path):
    # A day's lease: the store renews its leases every third of one, a write that is not a refusal's. With the
    # default, a machine slow enough (the lab's emulated s390x cell) renewed them during the loop.
    store = Tasks(SqliteTaskStore(path, lease_ms=24 * 3600 * 1000))
    try:
        created = 0
        for _ in range(1000):
            store.create("one-client")
            created += 1
        on_disk = os.path.getsize(path) + os.path.getsize(path + "-wal")
        refusals = []

        def refused_all():
            for _ in range(9000):
                try:
                    store.create("one-client")
                except TaskLimitReached:
                    refusals.append(1)

        grown = memory_grown(refused_all)
        assert (created, len(refusals)) == (1000, 9000)
        assert os.path.getsize(path) + os.path.getsize(path + "-wal") == on_disk  # a refusal writes nothing
        assert on_disk < 8 * 1024 * 1024, on_disk
        assert grown is None or grown < 1024 * 1024, grown
    finally:
        store.close()


def test_the_sessions_events_are_bounded_across_sessions_in_the_database(path):
    """Past max_stored_bytes (every session's events together) the oldest go, whichever session's; a replay that
    needs one says it was missed."""
    writer, reader = SqliteTaskStore(path), SqliteTaskStore(path)
    try:
        sessions = SqlSessionStore(writer, max_stored_bytes=10)
        sessions.prune_every = 1
        for session in ("a", "b"):
            sessions.open_stream(session, "get")
            sessions.append(session, "get", 1, b"xxxx")
            sessions.append(session, "get", 2, b"xxxx")
            assert sessions.flush()
        other = reader.session_store()
        assert other.replay("a", "get", 0).missed and other.replay("a", "get", 0).events == []
        replay = other.replay("b", "get", 0)
        assert [n for n, _ in replay.events] == [1, 2] and not replay.missed
    finally:
        writer.close()
        reader.close()


def test_what_outlives_any_session_goes_from_the_database(path):
    """A session no process ended (its processes died): its rows go once they are older than a session lives."""
    from mcpserver.store._sql_sessions import KEEP_MS

    clock = Clock()
    writer, reader = SqliteTaskStore(path, clock=clock), SqliteTaskStore(path)
    try:
        sessions = SqlSessionStore(writer)
        sessions.prune_every = 1
        sessions.open_stream("gone", "get")
        sessions.append("gone", "get", 1, b"{}")
        sessions.subscribe("gone", "res://a", True)
        assert sessions.flush()
        clock.now += KEEP_MS / 1000 - 1
        sessions.append("live", "get", 1, b"{}")
        assert sessions.flush()
        other = reader.session_store()
        assert other.replay("gone", "get", 0) is not None and other.subscriptions("gone") == {"res://a"}
        clock.now += 2
        sessions.append("live", "get", 2, b"{}")
        assert sessions.flush()
        assert other.replay("gone", "get", 0) is None and other.subscriptions("gone") == set()
        assert other.replay("live", "get", 0) is not None
    finally:
        writer.close()
        reader.close()
