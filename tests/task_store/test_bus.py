"""One bus for notifications across processes (issue 37, item 4): two real servers on two ports share a store,
an SQLite file or a PostgreSQL database, and a change made on either reaches the listeners of both, each once: the
2026-07-28 subscriptions/listen streams (resource updates, list changes, a task's status) and a legacy session's
GET stream. The fan-out latency (a change's call answered on one, the notification read on the other) is printed."""

import json
import os
import statistics
import sys
import time

import pytest
from mcptest import GUNICORN_MISSING, HAS_GUNICORN, ROOT, HttpServer, call, gunicorn_server, mcp_headers, request

sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
from legacy_http import LegacySession

BUS_TOOLS = os.path.join(ROOT, "tests", "bus_tools.py")
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
UPDATED = "notifications/resources/updated"
WITH_TASKS = {**request("x")["params"]["_meta"],
              "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
CHANGES = 20


@pytest.fixture
def servers(spec):
    with HttpServer(BUS_TOOLS, "--task-store", spec) as one, HttpServer(BUS_TOOLS, "--task-store", spec) as other:
        yield one, other
        assert one.stop() == 0, one.stderr
        assert other.stop() == 0, other.stderr


class Listen:
    """A subscriptions/listen stream, read message by message."""

    def __init__(self, server, listen_id, meta=None, connection=None, **notifications):
        message = request("subscriptions/listen", listen_id, meta=meta, notifications=notifications)
        self.connection = connection or server.connection(timeout=10)
        self.connection.request("POST", server.path, body=json.dumps(message).encode(), headers=mcp_headers(message))
        self.response = self.connection.getresponse()
        assert self.response.status == 200
        self.acknowledged = self.next()
        assert self.acknowledged["method"] == "notifications/subscriptions/acknowledged", self.acknowledged

    def close(self):
        self.connection.close()

    def next(self):
        while True:
            line = self.response.readline()
            assert line, "the listen stream ended"
            if line.startswith(b"data: "):
                return json.loads(line[6:])

    def heard(self, predicate, seconds=90):
        """Every message up to the first `predicate` accepts; fails after `seconds` (a quiet stream sends a comment
        every 15 s: the clock is looked at then too)."""
        seen, deadline = [], time.monotonic() + seconds
        while not seen or not predicate(seen[-1]):
            assert time.monotonic() < deadline, f"not heard in {seconds} s: {seen}"
            line = self.response.readline()
            assert line, "the listen stream ended"
            if line.startswith(b"data: "):
                seen.append(json.loads(line[6:]))
        return seen

    def until(self, uri):
        """Every message up to the update of `uri`, that one included."""
        seen = []
        while not seen or seen[-1].get("params", {}).get("uri") != uri:
            seen.append(self.next())
        return seen


def ok(server, message):
    return ok_on(server, None, message)


def latencies(changer, read, uri_of, connection=None):
    """The seconds from each change's call answered by `changer` to its notification read with `read`."""
    waited = []
    for n in range(CHANGES):
        ok_on(changer, connection, call("touch", uri=uri_of(n)))
        answered = time.monotonic()
        message = read()
        waited.append(time.monotonic() - answered)
        assert message["params"]["uri"] == uri_of(n), message
    return waited


def report(what, spec, waited):
    store = "PostgreSQL" if "://" in spec or "dbname" in spec else "SQLite"
    print(f"\nfan-out {what} on {store}: median {statistics.median(waited) * 1000:.1f} ms, "
          f"max {max(waited) * 1000:.1f} ms over {len(waited)} changes")


def test_a_change_on_either_process_reaches_the_listen_streams_of_both_each_once(servers, spec):
    one, other = servers
    uris = [f"res://x-{n}" for n in range(CHANGES)]
    here = Listen(one, "here", toolsListChanged=True, resourceSubscriptions=[*uris, "res://end"])
    there = Listen(other, "there", toolsListChanged=True, resourceSubscriptions=[*uris, "res://end"])
    report("to a listen stream", spec, latencies(other, here.next, uris.__getitem__))
    ok(one, call("grow", name="grown"))  # the other way round: changes made on the first (in order: one bus)
    ok(one, call("touch", uri="res://end"))
    heard_here, heard_there = here.until("res://end"), there.until("res://end")
    assert [m["method"] for m in heard_here] == ["notifications/tools/list_changed", UPDATED]
    assert heard_here[0]["params"]["_meta"] == {SUBSCRIPTION: "here"}
    # The process that made the changes told its own listener once, and its bus did not tell it again.
    assert [m["params"].get("uri") for m in heard_there] == [*uris, None, "res://end"], heard_there
    here.close()
    there.close()


def test_a_change_on_one_process_reaches_a_legacy_sessions_get_stream_on_the_other(servers, spec):
    one, other = servers
    session = LegacySession(one)
    uris = [f"res://y-{n}" for n in range(CHANGES)]
    for uri in [*uris, "res://end"]:
        session.subscribe(uri)
    stream = session.open()
    stream.next(skip_priming=False)
    report("to a legacy GET stream", spec, latencies(other, lambda: stream.next(UPDATED).message, uris.__getitem__))
    ok(other, call("grow", name="grown"))
    ok(other, call("touch", uri="res://end"))
    rest = []
    while not rest or rest[-1].method != UPDATED:
        rest.append(stream.next())
    assert [event.method for event in rest] == ["notifications/tools/list_changed", UPDATED]
    assert rest[-1].message["params"]["uri"] == "res://end"
    stream.drop()


def test_a_task_running_on_one_process_is_followed_to_its_end_from_the_other(servers):
    one, other = servers
    task_id = ok(other, request("tools/call", meta=WITH_TASKS, name="wait", arguments={"seconds": 1}))["taskId"]
    follower = Listen(one, "follow", meta=WITH_TASKS, taskIds=[task_id])
    assert follower.acknowledged["params"]["notifications"] == {"taskIds": [task_id]}
    statuses = []
    while not statuses or statuses[-1]["status"] not in ("completed", "failed", "cancelled"):
        note = follower.next()
        assert note["method"] == "notifications/tasks" and note["params"]["taskId"] == task_id, note
        statuses.append(note["params"])
    assert statuses[-1]["status"] == "completed"
    assert statuses[-1]["result"]["content"][0]["text"] == "waited 1"
    follower.close()


def worker(server, connection):
    return ok_on(server, connection, call("pid"))["content"][0]["text"]


def ok_on(server, connection, message):
    status, _, body = server.post(message, connection=connection)
    assert status == 200 and "result" in body, body
    return body["result"]


@pytest.mark.skipif(not HAS_GUNICORN, reason=GUNICORN_MISSING)
def test_two_gunicorn_workers_hear_each_others_changes(spec):
    """The store opened in gunicorn's master (--preload): each worker starts its own bus threads after the fork. A
    keep-alive connection stays with one worker, so the listener and the changes are put on different ones."""
    app = f"mcpserver.http:create_app({BUS_TOOLS!r}, task_store={spec!r})"
    # --graceful-timeout: a gthread worker waits out a listen stream whose client has gone (as without a bus)
    with gunicorn_server(app, "--preload", "-w", "2", "-k", "gthread", "--threads", "4", "--graceful-timeout", "3") \
            as server:
        connection = server.connection(timeout=10)
        listening = worker(server, connection)
        listener = Listen(server, "l", connection=connection, resourceSubscriptions=["res://z", "res://end"])
        try:
            changer = on_another_worker(server, listening)
            try:
                waited = latencies(server, listener.next, lambda n: "res://z", connection=changer)
                ok_on(server, changer, call("touch", uri="res://end"))
                assert listener.until("res://end") == [{"jsonrpc": "2.0", "method": UPDATED,
                                                        "params": {"uri": "res://end", "_meta": {SUBSCRIPTION: "l"}}}]
                report("between gunicorn workers", spec, waited)
            finally:
                changer.close()
        finally:
            listener.close()


def on_another_worker(server, pid, seconds=60):
    """A keep-alive connection served by a worker other than `pid`. Time-bound, not count-bound: on a loaded
    machine the second worker can still be starting while the first takes every connection (CI saw 50 in a
    row)."""
    deadline = time.monotonic() + seconds
    while True:
        changer = server.connection(timeout=10)
        try:
            if worker(server, changer) != pid:
                return changer
        except BaseException:
            changer.close()
            raise
        changer.close()
        if time.monotonic() > deadline:
            pytest.fail(f"every connection in {seconds} s reached the listener's worker")
        time.sleep(0.05)


def test_a_bus_whose_postgresql_connections_were_cut_hears_again(database):
    """The database ends every connection of the store's (a restart, a failover): the listening process opens
    its connection again and hears the changes published after that."""
    from mcpserver.tasks import open_task_store

    stores = [open_task_store(database), open_task_store(database)]
    publisher, listener = (store.bus() for store in stores)
    try:
        hears_again_after_the_cut(database, publisher, listener)
    finally:  # before the database is dropped: a bus left running would try it again every second
        for bus, store in zip((publisher, listener), stores):
            bus.close()
            store.close()


def hears_again_after_the_cut(database, publisher, listener):
    import psycopg

    heard = []
    listener.deliver = heard.append
    listener.listen()
    publisher.publish({"kind": "resource", "uri": "res://before"})
    deadline = time.monotonic() + 10
    while not heard and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [c["uri"] for c in heard] == ["res://before"]
    with psycopg.connect(database, autocommit=True) as admin:
        cut = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                            " WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
    assert cut >= 2  # the listening connection and the publisher's pooled one
    deadline = time.monotonic() + 15
    while heard[-1]["uri"] != "res://after" and time.monotonic() < deadline:
        publisher.publish({"kind": "resource", "uri": "res://after"})  # what is sent while it is away is lost
        time.sleep(0.2)
    assert heard[-1]["uri"] == "res://after"
