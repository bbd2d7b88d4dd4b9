"""A legacy session served by two replicas (issue 37, item 3: "in the --task-store database when one is set, so a
replica other than the first can replay"): two real servers share a store (an SQLite file, a PostgreSQL database)
and a state key, so each honours the other's session ids. A stream cut on one is resumed with Last-Event-ID on the
other, which replays it from the database, every event once and in order; a session's subscriptions, made on one,
hold on the other; an id that is not the session's replays nothing there either."""

import os
import sys
import time

import pytest
from mcpserver.http._channel import SSE_RETRY_MS
from mcptest import RESUME_TOOLS, ROOT, HttpServer

sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
from legacy_http import LegacySession

UPDATED = "notifications/resources/updated"
PROGRESS = "notifications/progress"
KEY = {"MCPSERVER_STATE_KEY": "replicas-" + "k" * 40}


@pytest.fixture
def replicas(spec):
    with HttpServer(RESUME_TOOLS, "--task-store", spec, env=KEY) as one, \
            HttpServer(RESUME_TOOLS, "--task-store", spec, env=KEY) as other:
        yield one, other
        assert one.stop() == 0, one.stderr
        assert other.stop() == 0, other.stderr


def number(event_id):
    stream, _, n = event_id.rpartition("-")
    return stream, int(n)


def resume_until_final(session, last):
    """Resumes with `last` until the stream's final event, as a client polls a stream another process carries;
    every event read, and how many resumes it took."""
    events, resumes = [], 0
    while not events or events[-1].message is None or "id" not in events[-1].message:
        resumes += 1
        assert resumes < 200, events
        resumed = session.open(last_event_id=last)
        assert resumed.status == 200, resumed.response.read()
        for event in resumed.events():
            if event.id:
                last = event.id
            if event.message is not None:
                events.append(event)
        resumed.drop()
        time.sleep(0.1)  # the server said retry: 1000; a tenth of it keeps the test short
    return events, resumes


def test_a_call_cut_on_one_replica_is_replayed_to_its_response_by_the_other(replicas):
    one, other = replicas
    session = LegacySession(one)
    message = {"jsonrpc": "2.0", "id": session.next_id(), "method": "tools/call",
               "params": {"name": "count", "arguments": {"to": 20, "delay": 0.02}, "_meta": {"progressToken": "p"}}}
    stream = session.open("POST", message)
    last = stream.next(skip_priming=False).id
    seen = []
    for _ in range(5):
        event = stream.next(PROGRESS)
        seen.append(event.message["params"]["progress"])
        last = event.id
    stream.drop()  # the call goes on on the first replica; the client comes back through the other
    session.server = other
    rest, resumes = resume_until_final(session, last)
    progress = [event.message["params"]["progress"] for event in rest[:-1]]
    assert seen + progress == list(range(1, 21)), (seen, progress)  # each once, in order
    assert rest[-1].message["id"] == message["id"]
    assert rest[-1].message["result"]["content"][0]["text"] == "counted to 20"
    assert {number(event.id)[0] for event in rest} == {number(last)[0]}  # the first replica's stream, replayed
    print(f"\nreplayed on the other replica: {len(rest)} events in {resumes} resumes")


def test_a_get_stream_cut_on_one_replica_resumes_on_the_other_with_what_it_missed(replicas):
    one, other = replicas
    session = LegacySession(one)
    session.subscribe("res://a")
    stream = session.open()
    stream.next(skip_priming=False)
    session.call("touch", uri="res://a", times=4)
    last = [stream.next(UPDATED).id for _ in range(2)][-1]
    stream.drop()
    session.call("touch", uri="res://a", times=3)  # 2 unread + 3 sent while away, on the first replica's stream
    session.server = other
    # As a client does, after the retry: the server sent. At once, the first replica's last events could still be
    # on their way to the database (a sender batch), and a GET stream replays what is there (CI saw 2 of 5).
    time.sleep(SSE_RETRY_MS / 1000)
    resumed = session.open(last_event_id=last)
    assert resumed.status == 200
    replayed = [resumed.next(UPDATED) for _ in range(5)]
    assert [number(event.id) for event in replayed] == [(number(last)[0], n) for n in range(number(last)[1] + 1,
                                                                                              number(last)[1] + 6)]
    session.call("touch", uri="res://a")  # on the other replica now: the subscription holds there, and it goes on
    assert resumed.next(UPDATED).message["params"]["uri"] == "res://a"
    resumed.drop()


def test_subscriptions_made_on_one_replica_hold_on_the_other(replicas):
    one, other = replicas
    session = LegacySession(one)
    session.subscribe("res://kept")
    session.server = other  # this session's first request here: its state is made from the store
    stream = session.open()
    stream.next(skip_priming=False)
    session.call("touch", uri="res://other")
    session.call("touch", uri="res://kept")
    assert stream.next(UPDATED).message["params"]["uri"] == "res://kept"  # and not res://other
    stream.drop()


def test_an_id_of_another_session_replays_nothing_on_the_other_replica(replicas):
    one, other = replicas
    alice, mallory = LegacySession(one), LegacySession(one)
    alice.subscribe("res://alice")
    stream = alice.open()
    first = stream.next(skip_priming=False).id
    alice.call("touch", uri="res://alice")
    stream.next(UPDATED)
    stream.drop()
    mallory.server = other
    stolen = mallory.open(last_event_id=first)
    refusal = stolen.response.read()
    stolen.drop()
    assert stolen.status == 400 and b"names no event" in refusal


def test_a_resume_while_the_database_is_down_is_503_not_a_refusal_of_the_id(tmp_path):
    """A stream this process does not hold is read from the database; with the database down the answer is 503
    with Retry-After (the client keeps its id and tries again), not 400 "names no event"."""
    from pgserver import PostgresServer

    database = PostgresServer()
    database.start()
    try:
        with HttpServer(RESUME_TOOLS, "--task-store", database.dsn, env=KEY) as server:
            session = LegacySession(server)
            stream = session.open()
            primer = stream.next(skip_priming=False).id
            stream.drop()
            database.stop()
            elsewhere = "0123456789abcdef-3"  # well formed, and no stream of this process: only the database knows
            resumed = session.open(last_event_id=elsewhere)
            body = resumed.response.read()
            resumed.drop()
            assert resumed.status == 503 and resumed.headers.get("retry-after") == "1", (resumed.status, body)
            assert b"task store" in body, body
            held = session.open(last_event_id=primer)  # a stream this process holds is replayed from memory still
            assert held.status == 200
            held.drop()
            assert server.stop() == 0, server.stderr
    finally:
        database.stop()
