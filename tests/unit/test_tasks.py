"""The Tasks extension (TASKS.md): a task tool's call the client polls. Through the core in this process,
and over real pipes for what needs a process (a restart, a kill)."""

import contextlib
import json
import os
import signal
import time

import pytest
from mcpserver import Context, ProtocolError, Server, ToolError
from mcpserver._context import Flight
from mcpserver.auth import Principal
from mcpserver.store import MemoryTaskStore
from mcptest import (
    GUNICORN_MISSING,
    HAS_GUNICORN,
    HAS_SQLITE,
    META,
    SQLITE_MISSING,
    StdioServer,
    core_reply,
    gunicorn_server,
    mcp_headers,
    request,
    responses,
    run_once,
)

needs_sqlite = pytest.mark.skipif(not HAS_SQLITE, reason=SQLITE_MISSING)

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = dict(META, **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {},
                                                                         "extensions": {TASKS: {}}}})
TERMINAL = ("completed", "failed", "cancelled")


def make_server(**options):
    server = Server("tasks", **options)

    @server.tool(task="optional")
    def wait(seconds: float, ctx: Context) -> str:
        ctx.start_task()
        ctx.sleep(seconds)
        return f"waited {seconds:g}"

    @server.tool(task="required")
    def only_task(ctx: Context) -> str:
        return "ran as a task"

    @server.tool(task="required")
    def plain_task() -> str:  # no Context: still a task, never the shortcut of tools that need nothing else
        return "ran as a task"

    @server.tool(task="optional")
    def broken(ctx: Context) -> str:
        raise ProtocolError("an internal fault")

    @server.tool(task="optional")
    def tool_error(ctx: Context) -> str:
        raise ToolError("the tool says no")

    @server.tool(task="optional")
    def ask_twice(ctx: Context) -> str:
        ctx.start_task()
        first = ctx.elicit("first?", key="a")
        second = ctx.elicit("second?", key="b")
        return f"{first['action']} {second['action']}"

    @server.tool(task="required")
    def mrtr_then_task(ctx: Context) -> str:
        answer = ctx.elicit("name?", key="name")
        ctx.start_task()
        return f"hello {answer.get('content', {}).get('name')}"

    @server.tool()
    def plain() -> str:
        return "plain"

    return server


def ask(server, method, meta=WITH_TASKS, principal=None, **params):
    reply = core_reply(request(method, meta=meta, **params), server, flight=Flight(principal=principal))
    return reply.response


def result(server, method, **params):
    response = ask(server, method, **params)
    assert "result" in response, response
    return response["result"]


def poll(server, task_id, until=TERMINAL, principal=None):
    for _ in range(200):
        task = ask(server, "tasks/get", taskId=task_id, principal=principal)["result"]
        if task["status"] in until:
            return task
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} stayed {task['status']}")


def test_discover_advertises_the_extension_only_with_a_task_tool():
    assert result(make_server(), "server/discover")["capabilities"]["extensions"] == {TASKS: {}}
    plain = Server("plain")
    plain.tool(lambda: "x", name="x")
    assert "extensions" not in result(plain, "server/discover")["capabilities"]


def test_a_call_that_declared_the_extension_gets_a_flat_create_task_result_then_the_result():
    server = make_server()
    created = result(server, "tools/call", name="wait", arguments={"seconds": 0.2})
    assert created["resultType"] == "task" and created["status"] == "working"
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs"} <= set(created)
    assert not {"result", "error", "inputRequests", "requestState", "task"} & set(created)
    done = poll(server, created["taskId"])
    assert done["resultType"] == "complete" and done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "waited 0.2"


def test_without_the_extension_an_optional_tool_runs_plainly_and_a_required_one_is_32021():
    server = make_server()
    assert result(server, "tools/call", meta=META, name="wait", arguments={"seconds": 0})["resultType"] == "complete"
    for name in ("only_task", "plain_task"):
        error = ask(server, "tools/call", meta=META, name=name, arguments={})["error"]
        assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    task = poll(server, result(server, "tools/call", name="plain_task", arguments={})["taskId"])
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "ran as a task"
    for method in ("tasks/get", "tasks/cancel"):
        assert ask(server, method, meta=META, taskId="x")["error"]["code"] == -32021
    assert result(server, "tools/call", name="plain", arguments={})["resultType"] == "complete"  # never a task


def test_errors_end_as_the_spec_says():
    server = make_server()
    failed = poll(server, result(server, "tools/call", name="broken", arguments={})["taskId"])
    assert failed["status"] == "failed" and failed["error"]["code"] == -32603 and "result" not in failed
    tool = poll(server, result(server, "tools/call", name="tool_error", arguments={})["taskId"])
    assert tool["status"] == "completed" and tool["result"]["isError"] is True


def test_cancel_stops_the_work_and_is_idempotent():
    server = make_server()
    task_id = result(server, "tools/call", name="wait", arguments={"seconds": 60})["taskId"]
    ack = result(server, "tasks/cancel", taskId=task_id)
    assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}  # no task fields (TASKS.md §7)
    assert poll(server, task_id)["status"] == "cancelled"
    assert set(result(server, "tasks/cancel", taskId=task_id)) == {"resultType", "_meta"}


def test_input_during_a_task_goes_through_tasks_get_and_update():
    server = make_server()
    task_id = result(server, "tools/call", name="ask_twice", arguments={})["taskId"]
    waiting = poll(server, task_id, until=("input_required",))
    assert list(waiting["inputRequests"]) == ["a"] and waiting["inputRequests"]["a"]["method"] == "elicitation/create"
    assert set(result(server, "tasks/update", taskId=task_id, inputResponses={
        "a": {"action": "accept", "content": {}}, "never-asked": {"ignored": True}})) == {"resultType", "_meta"}
    second = poll(server, task_id, until=("input_required",))
    while list(second["inputRequests"]) != ["b"]:
        second = poll(server, task_id, until=("input_required",))
    result(server, "tasks/update", taskId=task_id, inputResponses={"b": {"action": "decline"}})
    assert poll(server, task_id)["result"]["content"][0]["text"] == "accept decline"


def test_input_asked_before_the_task_starts_is_asked_the_mrtr_way():
    server = make_server()
    first = result(server, "tools/call", name="mrtr_then_task", arguments={})
    assert first["resultType"] == "input_required" and "taskId" not in first
    created = result(server, "tools/call", name="mrtr_then_task", arguments={}, requestState=first["requestState"],
                     inputResponses={"name": {"action": "accept", "content": {"name": "Ada"}}})
    assert created["resultType"] == "task" and "requestState" not in created
    assert poll(server, created["taskId"])["result"]["content"][0]["text"] == "hello Ada"


def test_another_principal_sees_not_found_never_the_task():
    server = make_server()
    ada, bob = Principal("ada"), Principal("bob")
    task_id = ask(server, "tools/call", principal=ada, name="wait", arguments={"seconds": 0.1})["result"]["taskId"]
    for method, params in (("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})):
        error = ask(server, method, principal=bob, taskId=task_id, **params)["error"]
        assert error == ask(server, method, principal=bob, taskId="no-such-task", **params)["error"]
        assert error["code"] == -32602
    assert poll(server, task_id, principal=ada)["status"] == "completed"


def test_malformed_task_requests_are_32602():
    server = make_server()
    assert ask(server, "tasks/get", taskId=5)["error"]["code"] == -32602
    assert ask(server, "tasks/get")["error"]["code"] == -32602
    assert ask(server, "tasks/update", taskId="x", inputResponses=[1])["error"]["code"] == -32602
    for retired in ("tasks/result", "tasks/list"):
        assert ask(server, retired, taskId="x")["error"]["code"] == -32601


def test_the_per_principal_limit_is_a_clear_error():
    server = make_server(task_store=MemoryTaskStore(max_tasks_per_owner=3))
    for _ in range(3):
        result(server, "tools/call", name="wait", arguments={"seconds": 0})
    error = ask(server, "tools/call", name="wait", arguments={"seconds": 0})["error"]
    assert error["code"] == -32603 and "3" in error["message"]


# --- over real pipes: a store that outlives the process ------------------------------------------------


TASK_SERVER = """
from mcpserver import Context, Server
server = Server("durable")

@server.tool(task="optional")
def wait(seconds: float, ctx: Context) -> str:
    ctx.start_task()
    ctx.sleep(seconds)
    return f"waited {seconds:g}"
"""


def call_line(method, id=1, **params):
    return json.dumps(request(method, id=id, meta=WITH_TASKS, **params)).encode() + b"\n"


@needs_sqlite
def test_a_task_whose_server_was_killed_reads_failed_and_a_finished_one_survives_a_restart(tmp_path):
    target, store = tmp_path / "durable.py", str(tmp_path / "tasks.db")
    target.write_text(TASK_SERVER)
    with StdioServer(str(target), "--task-store", store) as server:
        done_id = server.ask(request("tools/call", id=1, meta=WITH_TASKS, name="wait",
                                     arguments={"seconds": 0}))["result"]["taskId"]
        running_id = server.ask(request("tools/call", id=2, meta=WITH_TASKS, name="wait",
                                        arguments={"seconds": 300}))["result"]["taskId"]
        for attempt in range(100):  # the quick one has finished
            if server.ask(request("tasks/get", id=f"g{attempt}", meta=WITH_TASKS,
                                  taskId=done_id))["result"]["status"] == "completed":
                break
            time.sleep(0.05)
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(10)
    again = run_once(str(target), call_line("tasks/get", id=1, taskId=running_id)
                     + call_line("tasks/get", id=2, taskId=done_id), "--task-store", store)
    answers = {a["id"]: a["result"] for a in responses(again.stdout)}
    assert answers[1]["status"] == "failed" and "process" in answers[1]["statusMessage"], answers[1]
    assert answers[2]["status"] == "completed" and answers[2]["result"]["content"][0]["text"] == "waited 0"


def test_a_store_that_cannot_serve_is_refused_at_start_up(tmp_path):
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not an SQLite file" * 100)
    target = tmp_path / "durable.py"
    target.write_text(TASK_SERVER)
    done = run_once(str(target), b"", "--task-store", str(broken))
    assert done.returncode == 1 and b"broken.db" in done.stderr, done.stderr


def test_task_lease_is_how_far_ahead_a_running_task_is_held_and_under_a_second_is_refused(tmp_path):
    sqlite3 = pytest.importorskip("sqlite3", reason="this Python has no sqlite3 module (built without SQLite)")
    target, store = tmp_path / "durable.py", tmp_path / "tasks.db"
    target.write_text(TASK_SERVER)
    with StdioServer(str(target), "--store", str(store), "--task-lease", "2.5") as server:
        server.ask(request("tools/call", id=1, meta=WITH_TASKS, name="wait", arguments={"seconds": 300}))
        for _ in range(3):  # renewed every third of it, each time to 2.5 s from then
            time.sleep(0.5)
            with contextlib.closing(sqlite3.connect(str(store))) as database:
                (lease_until,), = database.execute("SELECT lease_until FROM mcpserver_tasks").fetchall()
            ahead = lease_until - time.time() * 1000
            assert 0 < ahead <= 2500, ahead  # the default lease would hold it 30 s ahead
    refused = run_once(str(target), b"", "--store", str(store), "--task-lease", "0.5")
    assert refused.returncode == 2 and b"a task lease is at least 1 second, not 0.5" in refused.stderr, refused.stderr


def test_a_listen_stream_hears_its_tasks_change_and_only_its_callers(tmp_path):
    target = tmp_path / "durable.py"
    target.write_text(TASK_SERVER)
    with StdioServer(str(target)) as server:
        task_id = server.ask(request("tools/call", id=1, meta=WITH_TASKS, name="wait",
                                     arguments={"seconds": 0.5}))["result"]["taskId"]
        server.send(call_line("subscriptions/listen", id="sub", notifications={"taskIds": [task_id, "not-mine"]}))
        acknowledged = server.receive()
        assert acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
        while (note := server.receive())["params"]["status"] != "completed":
            assert note["method"] == "notifications/tasks" and note["params"]["taskId"] == task_id
        assert note["params"]["result"]["content"][0]["text"] == "waited 0.5"
        assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub"
        refused = server.ask(request("subscriptions/listen", id="no-ext", meta=META,
                                     notifications={"taskIds": [task_id]}))
        assert refused["error"]["code"] == -32021


SHARED_SERVER = TASK_SERVER + """
import os

@server.tool()
def worker() -> str:
    return str(os.getpid())
"""


@needs_sqlite
@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
def test_gunicorn_workers_share_tasks_through_an_sqlite_store(tmp_path):
    """A task created through one worker is polled through whichever worker the next connection reaches."""
    target = tmp_path / "shared.py"
    target.write_text(SHARED_SERVER)
    app = f"mcpserver.http:create_app({str(target)!r}, task_store={str(tmp_path / 'tasks.db')!r})"
    with gunicorn_server(app, "-w", "2") as server:
        def post(message):
            headers = dict(mcp_headers(message), **{"Mcp-Name": message["params"].get("name")
                                                    or message["params"].get("taskId")})
            return server.post(message, headers=headers)[2]

        created = post(request("tools/call", meta=WITH_TASKS, name="wait", arguments={"seconds": 1}))
        task_id = created["result"]["taskId"]
        seen, statuses = set(), []
        for n in range(60):  # a fresh connection each: gunicorn's workers take turns
            seen.add(post(request("tools/call", id=n, name="worker", arguments={}))["result"]["content"][0]["text"])
            statuses.append(post(request("tasks/get", id=n, meta=WITH_TASKS, taskId=task_id))["result"]["status"])
            if statuses[-1] == "completed" and len(seen) > 1:
                break
            time.sleep(0.05)
        assert len(seen) == 2, "one worker served everything: nothing was shared"
        assert statuses[-1] == "completed" and "failed" not in statuses
