"""PostgresTaskStore against a real PostgreSQL server: the interface's contract tests (tests/unit/
test_task_store.py, run here with `make_store` and `store_spec` naming PostgreSQL; among them a server killed
with SIGKILL and started again), two server processes on one database, the limit raced by four processes, and
the refusals at open."""

import inspect
import subprocess

import psycopg
import pytest
import test_session_store
import test_task_store
from mcpserver.errors import ConfigError
from mcpserver.store import PostgresTaskStore, StoreUnavailable, TaskLimitReached, open_task_store
from mcpserver.store._postgres import SCHEMA_VERSION, redacted
from mcpserver.tasks import Tasks
from pgserver import PostgresServer
from task_store_worker import StoreProcess, race_creates
from test_task_store import RESULT

# Every contract test, unchanged: those that take `make_store` or `store_spec` get the fixtures below.
globals().update({name: test for name, test in vars(test_task_store).items() if name.startswith("test_")
                  and {"make_store", "store_spec"} & set(inspect.signature(test).parameters)})
clock = test_task_store.clock
globals().update(test_session_store.contract())  # and the session store's, written by one store, read by another


@pytest.fixture
def make_sessions(database, request):
    return lambda **bounds: test_session_store.across_processes(lambda: PostgresTaskStore(database), request, **bounds)


@pytest.fixture
def store_spec(database):
    return database


@pytest.fixture
def make_store(database, clock):
    opened = []

    def make(**options):
        options.setdefault("clock", clock)
        opened.append(Tasks(PostgresTaskStore(database, **options), monotonic=clock))  # leases watched on it too
        return opened[-1]

    yield make
    for store in opened:
        store.close()


def test_two_server_processes_share_one_database(database):
    runner, client = StoreProcess(database), StoreProcess(database)
    try:
        task_id = runner.ok("create", "alice")["task_id"]
        assert client.ok("get", task_id, "alice")["status"] == "working"
        runner.ok("need_input", task_id, {"q": {"method": "roots/list"}})
        client.ok("answer", task_id, "alice", {"q": {"roots": []}})
        assert runner.ok("take_answers", task_id) == {"q": {"roots": []}}
        client.ok("request_cancel", task_id, "alice")
        assert runner.ok("cancel_requested", task_id) is True
        runner.ok("finish", task_id, result=RESULT)  # the work won the race with the cancel (TASKS.md §7)
        assert client.ok("get", task_id, "alice")["detailed"]["result"] == RESULT
        assert client.call("get", task_id, "mallory")["error"] == "TaskNotFound"
    finally:
        runner.close()
        client.close()


def test_processes_creating_at_once_never_pass_the_owners_limit_together(database):
    PostgresTaskStore(database).close()
    created = race_creates(database)
    assert sum(created) == 100, created  # the per-owner advisory lock: count and insert are one step


def test_ten_thousand_tasks_from_one_client_meet_the_limit_in_bounded_space(database):
    store = Tasks(PostgresTaskStore(database))
    try:
        for _ in range(1000):
            store.create("one-client")
        refusals = 0
        for _ in range(9000):
            try:
                store.create("one-client")
            except TaskLimitReached:
                refusals += 1
        with psycopg.connect(database) as connection:
            size = connection.execute("SELECT pg_total_relation_size('mcpserver_tasks')").fetchone()[0]
            count = connection.execute("SELECT count(*) FROM mcpserver_tasks").fetchone()[0]
        assert (refusals, count) == (9000, 1000) and size < 8 * 1024 * 1024, size
    finally:
        store.close()


def test_another_schema_version_and_a_read_only_database_are_refused_at_open(database):
    PostgresTaskStore(database).close()
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("UPDATE mcpserver_meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(ConfigError, match=f"schema version 99; this mcpserver reads version {SCHEMA_VERSION}"):
        PostgresTaskStore(database)
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("UPDATE mcpserver_meta SET value = %s WHERE key = 'schema'", (str(SCHEMA_VERSION),))
        name = connection.info.dbname
        connection.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")  # as a replica is
    with pytest.raises(ConfigError, match="read-only transaction"):
        PostgresTaskStore(database)


def test_an_unreachable_database_is_refused_at_open_without_its_password(tmp_path):
    dsn = f"postgresql://someone:s3cret@/tasks?host={tmp_path}&port=5999"
    with pytest.raises(ConfigError, match="cannot be reached") as refused:
        open_task_store(dsn)
    assert "s3cret" not in str(refused.value) and "someone:***@" in str(refused.value)
    assert redacted("host=db password=s3cret") == "the PostgreSQL database (connection string withheld)"


def test_a_database_server_that_goes_away_gives_a_specific_error_and_is_used_again_when_back():
    server = PostgresServer(durable=True).start()  # without fsync, an immediate stop would lose the task
    try:
        store = Tasks(PostgresTaskStore(server.dsn))
        task_id = store.create("alice").task_id
        data = f"{server.root}/data"
        server._run([f"{server_bindir()}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        with pytest.raises(StoreUnavailable) as refused:
            store.get(task_id, "alice")
        assert refused.value.code == -32603 and "s3cret" not in refused.value.message
        server._run([f"{server_bindir()}/pg_ctl", "-D", data, "-l", f"{server.root}/log", "-o",
                     f"-k {server.root} -c listen_addresses=''", "-w", "start"])
        assert store.get(task_id, "alice").status == "working"  # a new connection: no restart needed here
        store.close()
    except subprocess.CalledProcessError as error:
        raise AssertionError(f"pg_ctl failed: {error.stderr}") from error
    finally:
        server.stop()


def server_bindir():
    from pgserver import bindir

    return bindir()
