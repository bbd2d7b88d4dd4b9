"""The task store's interface (mcpserver.store._store), the same for every backend: these tests run on
MemoryTaskStore and SqliteTaskStore here, and on PostgresTaskStore in tests/task_store (which imports
them and gives `make_store` and `store_spec` other meanings). `make_store()` opens a store; for a shared
backend, a second call opens a second store object on the same tasks (another connection, as another process
would). `store_spec` is what --store names, for a test that opens the store in server processes of its own."""

import dataclasses
import signal
import threading
import time

import pytest
from mcpserver.store import MAX_RESULT_BYTES, MemoryTaskStore, Runner, StoreFull, StoreUnavailable, TaskLimitReached
from mcpserver.tasks import InvalidTransition, TaskNotFound, Tasks
from mcpserver.tasks._record import new_task, this_runner
from task_store_worker import StoreProcess

try:
    import sqlite3  # noqa: F401  (a Python built without it: the musl-busybox lab cell)

    HAS_SQLITE = True
except ImportError:
    HAS_SQLITE = False

ASK = {"method": "elicitation/create", "params": {"message": "Sure?", "requestedSchema": {"type": "object"}}}
RESULT = {"content": [{"type": "text", "text": "done"}]}


def memory_grown(work):
    """Bytes `work()` left allocated (tracemalloc), or None where there is no tracemalloc (PyPy)."""
    try:
        import tracemalloc
    except ImportError:
        work()
        return None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


class Clock:
    """A store clock the test moves: TTLs and leases without sleeping."""

    def __init__(self):
        self.now = 1_785_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request, tmp_path, clock):
    if request.param == "sqlite" and not HAS_SQLITE:
        pytest.skip("this Python has no sqlite3 module")
    opened = []
    first = []

    def make(**options):
        options.setdefault("clock", clock)
        if request.param == "memory":
            if first:  # one process's memory: a "second store" is the same object
                return first[0]
            store = MemoryTaskStore(**options)
        else:
            from mcpserver.store import SqliteTaskStore

            store = SqliteTaskStore(str(tmp_path / "tasks.db"), **options)
        tasks = Tasks(store, monotonic=clock)  # the test's clock watches leases too
        first[:1] = first or [tasks]
        opened.append(tasks)
        return tasks

    yield make
    for tasks in opened:
        tasks.close()


@pytest.fixture(params=["memory", "sqlite"])
def store_spec(request, tmp_path):
    if request.param == "sqlite" and not HAS_SQLITE:
        pytest.skip("this Python has no sqlite3 module")
    return "memory" if request.param == "memory" else str(tmp_path / "tasks.db")


def test_a_server_killed_and_started_again_reports_its_running_task_failed_and_keeps_a_result(store_spec):
    # The store's contract, once for every backend: create, a lease, SIGKILL, a restart, a read.
    first = StoreProcess(store_spec)
    created = first.ok("create", "alice")
    assert created["runner"]["pid"] == first.pid and created["lease_until"] > time.time() * 1000  # its lease held
    running = created["task_id"]
    done = first.ok("create", "alice")["task_id"]
    first.ok("finish", done, result=RESULT)
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    first.close()
    restarted = StoreProcess(store_spec)  # the server again, on the same store
    try:
        if store_spec == "memory":  # its tasks lived and died with the process: none is reported running
            assert [restarted.call("get", task_id, "alice")["error"] for task_id in (running, done)] == [
                "TaskNotFound", "TaskNotFound"]
            return
        failed = restarted.ok("get", running, "alice")
        assert failed["status"] == "failed" and "ended before the task finished" in failed["status_message"]
        assert failed["error"]["code"] == -32603 and f"pid {first.pid}" in failed["error"]["message"]
        assert restarted.ok("get", done, "alice")["detailed"]["result"] == RESULT
        assert restarted.ok("sweep") == {"expired": 0, "orphaned": 0}  # the get already saved it as failed
    finally:
        restarted.close()


def test_a_task_is_readable_at_once_by_another_store_object(make_store):
    # TASKS.md §3: creation is strongly consistent.
    store = make_store()
    record = store.create("alice", ttl_ms=60_000, poll_interval_ms=250, status_message="queued")
    again = make_store().get(record.task_id, "alice")
    assert again == record
    assert again.detailed()["status"] == "working" and again.detailed()["statusMessage"] == "queued"


def test_another_owners_task_is_not_found_exactly_as_an_unknown_one(make_store):
    store = make_store()
    record = store.create("alice")
    refusals = []
    for call in (lambda: store.get(record.task_id, "mallory"), lambda: store.get("no-such-task", "alice"),
                 lambda: store.answer(record.task_id, "mallory", {"a": {}}),
                 lambda: store.request_cancel(record.task_id, "mallory")):
        with pytest.raises(TaskNotFound) as refused:
            call()
        refusals.append((refused.value.code, refused.value.message, refused.value.data))
    assert set(refusals) == {(-32602, "Failed to retrieve task: Task not found", None)}
    assert not store.get(record.task_id, "alice").cancel_requested  # mallory's cancel changed nothing


def test_an_expired_task_is_not_found_and_sweep_deletes_it_with_its_result(make_store, clock):
    store = make_store()
    record = store.create("alice", ttl_ms=5_000)
    store.finish(record.task_id, result=RESULT)
    clock.now += 4.999
    assert store.get(record.task_id, "alice").result == RESULT  # readable for its whole TTL (§8)
    clock.now += 0.001
    with pytest.raises(TaskNotFound):
        store.get(record.task_id, "alice")
    with pytest.raises(TaskNotFound):
        store.answer(record.task_id, "alice", {})
    unlimited = store.create("alice", ttl_ms=None)
    assert store.sweep().expired == 1
    assert store.versions([record.task_id, unlimited.task_id]) == {unlimited.task_id: 1}  # row and result gone
    clock.now += 10 ** 7
    assert store.get(unlimited.task_id, "alice").status == "working"


def test_input_round_trip_between_client_and_runner(make_store):
    store, client = make_store(), make_store()
    task_id = store.create("alice").task_id
    store.need_input(task_id, {"a": ASK, "b": ASK}, "Two questions")
    shown = client.get(task_id, "alice").detailed()
    assert shown["status"] == "input_required" and shown["inputRequests"] == {"a": ASK, "b": ASK}
    client.answer(task_id, "alice", {"a": {"action": "accept", "content": {"ok": True}}, "unknown-key": {"x": 1}})
    # §6 (conformance tasks-mrtr-input): the very next get shows the answered key gone, the other kept.
    shown = client.get(task_id, "alice").detailed()
    assert shown["status"] == "input_required" and list(shown["inputRequests"]) == ["b"]
    assert store.take_answers(task_id) == {"a": {"action": "accept", "content": {"ok": True}}}
    assert store.take_answers(task_id) == {}
    client.answer(task_id, "alice", {"b": {"action": "decline"}})
    assert client.get(task_id, "alice").status == "working"
    assert store.take_answers(task_id) == {"b": {"action": "decline"}}
    with pytest.raises(ValueError, match="already issued"):
        store.need_input(task_id, {"a": ASK})
    store.finish(task_id, result=RESULT)
    assert client.answer(task_id, "alice", {"b": {"action": "accept"}}).status == "completed"  # acked, ignored


def test_cancel_is_idempotent_and_a_finished_task_stays_finished(make_store):
    store, client = make_store(), make_store()
    task_id = store.create("alice").task_id
    assert not store.cancel_requested(task_id)
    assert client.request_cancel(task_id, "alice").cancel_requested
    assert client.request_cancel(task_id, "alice").cancel_requested
    assert store.cancel_requested(task_id)
    assert store.set_status(task_id, "cancelled", "stopped on request").status == "cancelled"
    assert client.request_cancel(task_id, "alice").status == "cancelled"
    done = store.create("alice").task_id
    store.finish(done, result=RESULT)
    assert client.request_cancel(done, "alice").status == "completed"
    assert not client.get(done, "alice").cancel_requested
    assert store.cancel_requested(done) and store.cancel_requested("gone")  # nothing left to do: stop


def test_terminal_is_terminal_in_the_store_too(make_store):
    store = make_store()
    task_id = store.create("alice").task_id
    store.finish(task_id, error={"code": -32000, "message": "the tool's request failed"})
    for change in (lambda: store.finish(task_id, result=RESULT), lambda: store.set_status(task_id, "working"),
                   lambda: store.need_input(task_id, {"z": ASK})):
        with pytest.raises(InvalidTransition) as refused:
            change()
        assert refused.value.code == -32603
    record = make_store().get(task_id, "alice")
    assert record.status == "failed" and record.error["code"] == -32000 and record.version == 2
    with pytest.raises(TaskNotFound):
        store.finish("no-such-task", result=RESULT)


def test_a_result_over_the_limit_is_stored_as_a_clear_failure(make_store):
    store = make_store()
    task_id = store.create("alice").task_id
    record = store.finish(task_id, result={"content": [{"type": "text", "text": "x" * (MAX_RESULT_BYTES + 1)}]})
    assert record.status == "failed"
    shown = make_store().get(task_id, "alice").detailed()
    assert shown["error"]["data"]["limit"] == MAX_RESULT_BYTES and "MAX_RESULT_BYTES" in shown["error"]["message"]


def test_the_per_owner_limit(make_store, clock):
    store = make_store(max_tasks_per_owner=3)
    first = [store.create("alice", ttl_ms=1000) for _ in range(3)]
    with pytest.raises(TaskLimitReached) as refused:
        store.create("alice")
    assert refused.value.code == -32603 and refused.value.data == {"limit": 3}
    assert "Too many tasks" in str(refused.value)
    store.finish(first[0].task_id, result=RESULT)
    with pytest.raises(TaskLimitReached):  # finished tasks still hold their results: they count until their TTL
        store.create("alice")
    assert store.create("bob").owner == "bob"  # another owner is not held back
    clock.now += 1
    assert store.create("alice").owner == "alice"  # expired ones no longer count, swept or not


def test_versions_and_wait_for_change_see_changes_from_another_store_object(make_store):
    store, other = make_store(), make_store()
    a, b = store.create("alice").task_id, store.create("alice").task_id
    assert store.versions([a, b, "missing"]) == {a: 1, b: 1}
    woke = []
    waiter = threading.Thread(target=lambda: woke.append(store.wait_for_change(a, 1, timeout=60)))
    waiter.start()
    other.request_cancel(a, "alice")  # through the other object: a poll (shared stores) or the same object's wake-up
    waiter.join(90)
    assert woke[0].version == 2 and woke[0].cancel_requested  # a timeout would give back version 1
    assert store.wait_for_change(b, 1, timeout=0).version == 1
    assert store.wait_for_change("missing", 0, timeout=0) is None
    assert store.versions([]) == {}


def test_on_change_hears_every_change_made_through_the_store(make_store):
    store = make_store()
    heard = []
    stop = store.on_change(lambda record: heard.append((record.task_id, record.status, record.version)))
    store.on_change(lambda record: 1 / 0)  # a failing listener must not undo or stop anything
    task_id = store.create("alice").task_id
    store.need_input(task_id, {"a": ASK})
    store.answer(task_id, "alice", {"a": {"action": "accept"}, "other": {}})
    store.answer(task_id, "alice", {"other": {}})  # changes nothing: heard nothing
    store.finish(task_id, result=RESULT)
    assert heard == [(task_id, "working", 1), (task_id, "input_required", 2), (task_id, "working", 3),
                     (task_id, "completed", 4)]
    stop()
    store.create("alice")
    assert len(heard) == 4


def foreign_task(owner, runner, lease_until, now):
    record = new_task(owner, now, ttl_ms=None, poll_interval_ms=None, lease_ms=0)
    return dataclasses.replace(record, runner=runner, lease_until=lease_until)


def test_a_task_whose_runner_is_gone_reads_failed_and_sweep_fails_it(make_store, clock):
    store = make_store()
    now = store.store.now()
    gone = foreign_task("alice", Runner(host="another-host", pid=1, started=1, token="gone"), now - 1, now)
    alive = foreign_task("alice", Runner(host="another-host", pid=2, started=1, token="alive"), now + 60_000, now)
    for record in (gone, alive):
        store.store.insert(record, 100, now)
    reader = make_store()
    assert reader.get(gone.task_id, "alice").status == "working"  # first seen: not standing still for a lease yet
    assert store.get(alive.task_id, "alice").status == "working"
    clock.now += 30
    shown = reader.get(gone.task_id, "alice")  # a whole lease (DEFAULT_LEASE_MS) without a renewal
    assert shown.status == "failed" and "stopped renewing its lease" in shown.status_message
    assert shown.error["code"] == -32603
    assert store.sweep().orphaned == 1  # alive too stood still for a lease: its runner renews nothing
    assert store.get(alive.task_id, "alice").status == "failed"
    assert store.sweep().orphaned == 0


def test_heartbeat_renews_this_processs_leases_only(make_store, clock):
    store = make_store(lease_ms=10_000)
    mine = store.create("alice").task_id
    now = store.store.now()
    theirs = foreign_task("alice", Runner(host="another-host", pid=3, started=1, token="theirs"), now + 5000, now)
    store.store.insert(theirs, 100, now)
    assert store.get(theirs.task_id, "alice").status == "working"  # first seen now
    clock.now += 8
    assert store.heartbeat() == 1
    clock.now += 8  # 16 s: mine renewed at 8 s lives to 18 s, theirs ended at 5 s
    assert store.get(mine, "alice").status == "working"
    assert store.get(theirs.task_id, "alice").status == "failed"
    assert this_runner().token == store.get(mine, "alice").runner.token


def test_a_result_the_store_cannot_take_is_kept_and_saved_later(make_store, monkeypatch):
    store = make_store()
    task_id = store.create("alice").task_id
    real_update = type(store.store).update

    def refuse(self, *arguments):
        raise StoreFull("The task store is full: it could not save this (simulated)")

    monkeypatch.setattr(type(store.store), "update", refuse)
    assert store.finish(task_id, result=RESULT) is None  # not saved, not lost
    monkeypatch.setattr(type(store.store), "update", real_update)
    assert store.get(task_id, "alice").result == RESULT  # this process already shows it
    store.heartbeat()
    assert make_store().get(task_id, "alice").result == RESULT
    assert store._unsaved == {}


def test_worker_side_errors_are_specific(make_store):
    store = make_store()
    for call in (lambda: store.set_status("nope", "working"), lambda: store.take_answers("nope"),
                 lambda: store.need_input("nope", {"a": ASK})):
        with pytest.raises(TaskNotFound):
            call()
    assert issubclass(StoreFull, StoreUnavailable) and StoreUnavailable("x").code == -32603


# --- MemoryTaskStore's own bounds ----------------------------------------------------------------------------------

def test_ten_thousand_tasks_for_one_owner_meet_the_limit_in_bounded_memory():
    store = Tasks(MemoryTaskStore())
    outcomes = []

    def create_all():
        for _ in range(10_000):
            try:
                outcomes.append(store.create("one-client").status)
            except TaskLimitReached:
                outcomes.append("refused")

    grown = memory_grown(create_all)
    assert outcomes.count("working") == 1000 and outcomes.count("refused") == 9000  # DEFAULT_MAX_TASKS_PER_OWNER
    assert grown is None or grown < 4 * 1024 * 1024, grown  # ~1-2 KiB per stored task; refusals keep nothing


def test_memory_store_refuses_new_tasks_past_its_budget_but_saves_running_ones():
    store = Tasks(MemoryTaskStore(max_bytes=100_000, max_tasks=5))
    running = [store.create(str(n)).task_id for n in range(3)]
    for task_id in running:  # 3 x 60 KB: over the budget, saved all the same
        assert store.finish(task_id, result={"content": [{"type": "text", "text": "x" * 60_000}]}).status == "completed"
    with pytest.raises(StoreFull, match="max_bytes"):
        store.create("another")
    small = Tasks(MemoryTaskStore(max_tasks=2))
    small.create("a")
    small.create("b")
    with pytest.raises(StoreFull, match="max_tasks"):
        small.create("c")


def test_tasks_are_counted_by_status_and_expired_ones_are_not(make_store, clock):
    # What /metrics shows of the store (mcpserver_tasks), in every backend.
    store = make_store()
    assert store.store.count_by_status(store.store.now()) == {}
    finished = store.create("alice", ttl_ms=5_000)
    store.finish(finished.task_id, result=RESULT)
    store.create("bob", ttl_ms=60_000)
    asking = store.create("bob", ttl_ms=60_000).task_id
    store.need_input(asking, {"a": ASK})
    assert store.store.count_by_status(store.store.now()) == {"completed": 1, "working": 1, "input_required": 1}
    clock.now += 5
    assert store.store.count_by_status(store.store.now()) == {"working": 1, "input_required": 1}
