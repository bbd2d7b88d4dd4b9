"""The session store's contract (mcpserver.store._events): what a legacy session keeps for Last-Event-ID and its
subscriptions. Tests that take `make_sessions` run here on the memory store, and in test_task_sqlite and
tests/task_store/test_postgres on the SQL stores, unchanged, written by one store and read by another on the same
database, as a replica reads what another wrote."""

import inspect

import pytest
from mcpserver.store import MemorySessionStore


@pytest.fixture
def make_sessions():
    return lambda **bounds: MemorySessionStore(**bounds)


def contract():
    """The tests that take `make_sessions`, for a module that gives them its own."""
    return {name: test for name, test in globals().items()
            if name.startswith("test_") and "make_sessions" in inspect.signature(test).parameters}


def across_processes(open_store, request, **bounds):
    """An AcrossProcesses of two SQL task stores `open_store()` opens on one database, closed after the test."""
    from mcpserver.store._sql_sessions import SqlSessionStore

    writer, reader = open_store(), open_store()
    request.addfinalizer(writer.close)
    request.addfinalizer(reader.close)
    return AcrossProcesses(SqlSessionStore(writer, **bounds), SqlSessionStore(reader, **bounds))


class AcrossProcesses:
    """Two session stores on one database, as two processes: everything is written by one, and read by the other once
    the first has written it there."""

    def __init__(self, writer, reader):
        self.writer, self.reader = writer, reader

    def __getattr__(self, name):
        if name in ("replay", "subscriptions"):
            assert self.writer.flush(10)
            return getattr(self.reader, name)
        return getattr(self.writer, name)


def test_a_stream_replays_what_followed_a_point_in_order(make_sessions):
    store = make_sessions()
    store.open_stream("s", "get")
    for n in range(1, 6):
        store.append("s", "get", n, b'{"n": %d}' % n)
    replay = store.replay("s", "get", 2)
    assert [n for n, _ in replay.events] == [3, 4, 5] and replay.head == 5 and not replay.missed
    assert replay.events[0][1] == b'{"n": 3}' and replay.request_id is None and not replay.final
    assert store.replay("s", "get", 5).events == []  # up to date: nothing, and nothing missed
    assert not store.replay("s", "get", 5).missed


def test_a_session_reads_only_its_own_streams(make_sessions):
    store = make_sessions()
    store.open_stream("alice", "get")
    store.append("alice", "get", 1, b"{}")
    assert store.replay("mallory", "get", 0) is None  # the same stream name, another session: nothing
    assert store.replay("alice", "nope", 0) is None
    assert store.replay("alice", "get", 2) is None  # past the stream's end: not an event it had
    assert store.replay("alice", "get", -1) is None


def test_a_request_stream_ends_with_its_response(make_sessions):
    store = make_sessions()
    store.open_stream("s", "call", request_id=7)
    store.append("s", "call", 1, b'{"progress": 1}')
    store.append("s", "call", 2, b'{"id": 7}', final=True)
    replay = store.replay("s", "call", 0)
    assert replay.final and replay.request_id == 7 and [n for n, _ in replay.events] == [1, 2]
    store.open_stream("s", "cancelled", request_id=8)
    store.end_stream("s", "cancelled")
    assert store.replay("s", "cancelled", 0).final


def test_past_the_count_the_oldest_go_and_a_replay_that_needs_them_says_so(make_sessions):
    store = make_sessions(max_session_events=3)
    store.open_stream("s", "a")
    store.open_stream("s", "b")
    store.append("s", "b", 1, b"1")
    for n in range(1, 4):
        store.append("s", "a", n, b"%d" % n)
    assert store.replay("s", "b", 0).missed  # the oldest of the session, whichever stream it was on
    assert [n for n, _ in store.replay("s", "a", 0).events] == [1, 2, 3]
    store.append("s", "a", 4, b"4")
    replay = store.replay("s", "a", 0)
    assert [n for n, _ in replay.events] == [2, 3, 4] and replay.missed
    assert not store.replay("s", "a", 1).missed  # the client had 1: it misses nothing


def test_past_the_bytes_the_oldest_go_and_an_event_too_large_to_keep_is_missed(make_sessions):
    store = make_sessions(max_session_bytes=10)
    store.open_stream("s", "a")
    for n in range(1, 4):
        store.append("s", "a", n, b"xxxx")  # 4 bytes each: the third pushes the first out
    assert [n for n, _ in store.replay("s", "a", 0).events] == [2, 3]
    store.append("s", "a", 4, b"y" * 11)  # never kept
    replay = store.replay("s", "a", 3)
    assert replay.events == [] and replay.head == 4 and replay.missed


def test_subscriptions_are_kept_per_session_and_end_with_it(make_sessions):
    store = make_sessions()
    store.subscribe("s", "notes://a", True)
    store.subscribe("s", "notes://b", True)
    store.subscribe("s", "notes://a", False)
    store.subscribe("t", "notes://c", True)
    assert store.subscriptions("s") == {"notes://b"} and store.subscriptions("t") == {"notes://c"}
    store.open_stream("s", "get")
    store.append("s", "get", 1, b"{}")
    store.end("s")
    assert store.subscriptions("s") == set() and store.replay("s", "get", 0) is None
    assert store.subscriptions("t") == {"notes://c"}


def test_the_memory_store_is_bounded_across_sessions():
    store = MemorySessionStore(max_bytes=10, max_sessions=2)
    for session in ("a", "b"):
        store.open_stream(session, "get")
        store.append(session, "get", 1, b"xxxx")
    store.append("b", "get", 2, b"xxxx")  # 12 bytes in all: the oldest of all (a's) goes
    assert store.replay("a", "get", 0).missed and not store.replay("b", "get", 0).missed
    store.open_stream("c", "get")  # a third session: the least recently used (a) is forgotten
    assert store.replay("a", "get", 0) is None and store.replay("b", "get", 0) is not None
