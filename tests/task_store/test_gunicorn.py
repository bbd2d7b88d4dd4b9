"""Two gunicorn workers share tasks: a task created through one is read, answered and cancelled through
the other, on SQLite and on PostgreSQL, and a worker killed mid-task leaves it `failed` for the other.
The store is opened in gunicorn's master before the workers fork (--preload)."""

import http.client
import json
import os
import signal
import time
from contextlib import contextmanager

import pytest
from mcptest import GUNICORN_MISSING, HAS_GUNICORN, gunicorn_server

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)


@pytest.fixture(params=["sqlite", "postgresql"])
def spec(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "tasks.db")
    return request.getfixturevalue("database")


class Worker:
    """One keep-alive connection, and so one gunicorn worker (gthread workers keep connections)."""

    def __init__(self, server):
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        self.pid = self.call("now")["pid"]

    def call(self, operation, *arguments, **keywords):
        self.connection.request("POST", "/", body=json.dumps([operation, list(arguments), keywords]))
        return json.loads(self.connection.getresponse().read())

    def ok(self, operation, *arguments, **keywords):
        answer = self.call(operation, *arguments, **keywords)
        assert "ok" in answer, answer
        return answer["ok"]


@contextmanager
def two_workers(spec):
    """gunicorn with two workers; a connection to each."""
    with gunicorn_server("store_app:app", "--workers", "2", "--worker-class", "gthread", "--threads", "4",
                         "--keep-alive", "60", "--preload", "--pythonpath", HERE,
                         env={"MCPSERVER_TEST_TASK_STORE": spec}) as server:
        first, opened = Worker(server), []
        for _ in range(200):  # each new connection goes to whichever worker accepts it first
            other = Worker(server)
            opened.append(other)
            if other.pid != first.pid:
                yield first, other
                break
        else:
            raise AssertionError(f"200 connections all went to worker {first.pid}")
        for worker in (first, *opened):
            worker.connection.close()


def test_two_workers_share_tasks(spec):
    with two_workers(spec) as (runner, client):
        task_id = runner.ok("create", "alice")["task_id"]
        assert client.ok("get", task_id, "alice")["status"] == "working"  # created in one worker, read in the other
        runner.ok("need_input", task_id, {"q": {"method": "roots/list"}})
        assert client.ok("answer", task_id, "alice", {"q": {"roots": []}})["status"] == "working"
        assert runner.ok("take_answers", task_id) == {"q": {"roots": []}}
        client.ok("request_cancel", task_id, "alice")
        assert runner.ok("cancel_requested", task_id) is True
        runner.ok("set_status", task_id, "cancelled")
        assert client.ok("get", task_id, "alice")["status"] == "cancelled"


def test_a_worker_killed_mid_task_leaves_it_failed_for_the_other(spec):
    with two_workers(spec) as (runner, client):
        task_id = runner.ok("create", "alice")["task_id"]
        done = runner.ok("create", "alice")["task_id"]
        runner.ok("finish", done, result={"content": [{"type": "text", "text": "kept"}]})
        os.kill(runner.pid, signal.SIGKILL)  # gunicorn's master reaps it and starts another worker
        deadline = time.monotonic() + 30  # until it is reaped, a zombie's pid still answers "alive"
        while os.path.exists(f"/proc/{runner.pid}") and time.monotonic() < deadline:
            time.sleep(0.01)
        failed = client.ok("get", task_id, "alice")
        assert failed["status"] == "failed" and f"pid {runner.pid}" in failed["status_message"], failed
        kept = client.ok("get", done, "alice")  # a result saved before the kill stays
        assert kept["status"] == "completed" and kept["result"]["content"][0]["text"] == "kept", kept
