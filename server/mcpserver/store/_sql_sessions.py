"""SqlSessionStore: what legacy HTTP sessions keep beyond one connection (_events), in the database of an SQL task
store, so that a process other than the one that wrote a stream replays it (a client resumed on another replica, or
on a gunicorn worker other than the first), and a session's subscriptions hold on every process that serves it.

Rules of this module:
- Three tables beside the tasks', made when first needed (CREATE ... IF NOT EXISTS, so a store written by an older
  mcpserver opens unchanged): mcpserver_streams (a stream's request, head and end), mcpserver_events (its events),
  mcpserver_subscriptions.
- Events go to the database through a Sender (_sender): `append` never waits, and this process's own events are
  also kept in memory (MemorySessionStore), where `recent` reads them. `replay` reads memory first and the database
  for a stream this process does not hold. A batch is one transaction, so a stream's head never runs ahead of its
  events there; a replay reads the head first, then the events up to it. The database lags this process's memory
  by a batch: a client cut off and sent to another process at once may name an event not written yet, so a replay
  of a stream (or a point) the database lacks reads again for REPLAY_WAIT_SECONDS before it says there is none.
- The bounds are the memory store's, per session, by count and bytes, applied after each batch to the sessions it
  touched: past either the oldest of the session go, and a replay that needs one says so (`missed`). Across
  sessions, MAX_STORED_EVENT_BYTES; and what is older than a session lives (legacy DEFAULT_SESSION_TTL) goes.
- Subscriptions are read and written at once (they are few, and a replica must see the latest).
- SQL: ON CONFLICT upserts and a window function (SQLite 3.25 or later; every PostgreSQL this package supports).
"""

from __future__ import annotations

import json
import threading
import time

from .._forks import renew_at_fork
from ._events import MAX_SESSION_EVENT_BYTES, MAX_SESSION_EVENTS, MemorySessionStore, Replay, SessionStore
from ._sender import Sender

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from ._database import SqlDatabase

__all__ = ["MAX_STORED_EVENT_BYTES", "SqlSessionStore"]

MAX_STORED_EVENT_BYTES = 256 * 1024 * 1024  # every session's events in the database together
KEEP_MS = 24 * 3600 * 1000  # legacy DEFAULT_SESSION_TTL: a row older than that belongs to an expired session
PRUNE_EVERY = 100  # batches between looks at the bounds across sessions
FLUSH_AT_CLOSE_SECONDS = 2.0
REPLAY_WAIT_SECONDS = 1.0  # a resume naming what the database lacks waits this long for the writer's batch
REPLAY_POLL_SECONDS = 0.05
CARRY_SECONDS = 5.0  # how often a process says in the database that it still carries its requests' open streams
ABANDONED_SECONDS = 3 * CARRY_SECONDS  # an open stream not touched for this long, by a reader's clock: abandoned
MAX_WATCHED = 10_000  # streams of other processes a reader keeps an eye on

_UPSERT_STREAM = ("INSERT INTO mcpserver_streams (session, stream, request_id, head, final, at)"
                  " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session, stream)"
                  " DO UPDATE SET head = excluded.head, final = excluded.final, at = excluded.at")
_OPEN_STREAM = ("INSERT INTO mcpserver_streams (session, stream, request_id, head, final, at) VALUES (?, ?, ?, 0, 0, ?)"
                " ON CONFLICT (session, stream) DO NOTHING")
_END_STREAM = "UPDATE mcpserver_streams SET final = 1, at = ? WHERE session = ? AND stream = ?"
_INSERT_EVENT = "INSERT INTO mcpserver_events (session, stream, number, size, at, data) VALUES (?, ?, ?, ?, ?, ?)"
_SESSION_TOTALS = "SELECT count(*), coalesce(sum(size), 0) FROM mcpserver_events WHERE session = ?"
_SESSION_NEWEST = "SELECT seq, size FROM mcpserver_events WHERE session = ? ORDER BY seq DESC"
_STREAM = "SELECT request_id, head, final, at FROM mcpserver_streams WHERE session = ? AND stream = ?"
_CARRY = "UPDATE mcpserver_streams SET at = ? WHERE session = ? AND stream = ? AND final = 0"
_EVENTS_AFTER = ("SELECT number, data FROM mcpserver_events WHERE session = ? AND stream = ? AND number > ?"
                 " AND number <= ? ORDER BY number")
_OLDEST_OVER = ("SELECT seq FROM (SELECT seq, sum(size) OVER (ORDER BY seq DESC) AS total FROM mcpserver_events) newest"
                " WHERE total > ? ORDER BY seq DESC LIMIT 1")
_SUBSCRIPTIONS = "SELECT uri FROM mcpserver_subscriptions WHERE session = ?"
_TABLES = ("mcpserver_events", "mcpserver_streams", "mcpserver_subscriptions")


def schema(serial: str, blob: str) -> tuple[str, ...]:
    """The statements that make the tables, with the backend's types for an auto-numbered key and for bytes."""
    return (
        "CREATE TABLE IF NOT EXISTS mcpserver_streams (session TEXT NOT NULL, stream TEXT NOT NULL, request_id TEXT,"
        " head BIGINT NOT NULL, final INTEGER NOT NULL, at BIGINT NOT NULL, PRIMARY KEY (session, stream))",
        f"CREATE TABLE IF NOT EXISTS mcpserver_events (seq {serial}, session TEXT NOT NULL, stream TEXT NOT NULL,"
        f" number BIGINT NOT NULL, size BIGINT NOT NULL, at BIGINT NOT NULL, data {blob} NOT NULL)",
        "CREATE INDEX IF NOT EXISTS mcpserver_events_stream ON mcpserver_events (session, stream, number)",
        "CREATE INDEX IF NOT EXISTS mcpserver_events_at ON mcpserver_events (at)",
        "CREATE INDEX IF NOT EXISTS mcpserver_streams_at ON mcpserver_streams (at)",
        "CREATE TABLE IF NOT EXISTS mcpserver_subscriptions (session TEXT NOT NULL, uri TEXT NOT NULL,"
        " at BIGINT NOT NULL, PRIMARY KEY (session, uri))",
    )


class SqlSessionStore(SessionStore):
    """A session store in `store`'s database, with this process's own streams in memory too."""

    def __init__(self, store: SqlDatabase, *, max_session_events: int = MAX_SESSION_EVENTS,
                 max_session_bytes: int = MAX_SESSION_EVENT_BYTES, max_stored_bytes: int = MAX_STORED_EVENT_BYTES):
        self.store = store
        self.max_stored_bytes = max_stored_bytes
        self.local = MemorySessionStore(max_session_events=max_session_events, max_session_bytes=max_session_bytes)
        self._closed = threading.Event()
        self._sender = Sender("mcpserver-sessions-send", "the session store", self._write, self._closed,
                              every=(CARRY_SECONDS, self._carried))
        self._watched = _Watched()
        self._batches = 0
        self.prune_every = PRUNE_EVERY
        store.run_atomically(self._create, lock="mcpserver_sessions")

    def _create(self, connection: Any) -> None:
        for statement in schema(self.store.serial, self.store.blob):
            self.store._count(connection, statement, ())

    # --- writes: memory at once, the database through the sender ------------------------------------------------

    def open_stream(self, session: str, stream: str, request_id: Any = None) -> None:
        self.local.open_stream(session, stream, request_id)
        self._sender.put(("open", session, stream, None if request_id is None else json.dumps(request_id)))

    def append(self, session: str, stream: str, number: int, data: bytes, final: bool = False) -> None:
        self.local.append(session, stream, number, data, final)
        self._sender.put(("append", session, stream, number, data, final))

    def end_stream(self, session: str, stream: str) -> None:
        self.local.end_stream(session, stream)
        self._sender.put(("end_stream", session, stream))

    def end(self, session: str) -> None:
        self.local.end(session)
        self._sender.put(("end", session))

    def flush(self, timeout: float = 10.0) -> bool:
        """Waits until what was written before is in the database (or refused); whether that was within `timeout`."""
        return self._sender.flush(timeout)

    def close(self) -> None:
        self.flush(FLUSH_AT_CLOSE_SECONDS)  # a replica replays what this one wrote last
        self._closed.set()

    def _carried(self) -> list[tuple[Any, ...]]:
        """The open streams of the requests this process runs, touched in the database: alive (see _Watched)."""
        return [("carry", session, stream) for session, stream in self.local.carried()]

    def _write(self, batch: list[tuple[Any, ...]]) -> None:
        now = self.store.now()
        self._batches += 1
        prune = (self._batches - 1) % self.prune_every == 0  # the first batch, then every prune_every-th

        def body(connection: Any) -> None:
            run = self.store._count
            touched = set()
            for change in batch:
                kind, session = change[0], change[1]
                if kind == "append":
                    _, _, stream, number, data, final = change
                    run(connection, _UPSERT_STREAM, (session, stream, None, number, int(final), now))
                    if len(data) <= self.local.max_session_bytes:  # else never kept, as in memory: a replay says missed
                        run(connection, _INSERT_EVENT, (session, stream, number, len(data), now, data))
                        touched.add(session)
                elif kind == "open":
                    run(connection, _OPEN_STREAM, (session, change[2], change[3], now))
                elif kind == "end_stream":
                    run(connection, _END_STREAM, (now, session, change[2]))
                elif kind == "carry":
                    run(connection, _CARRY, (now, session, change[2]))
                else:  # the session ended
                    for table in _TABLES:
                        run(connection, f"DELETE FROM {table} WHERE session = ?", (session,))
                    touched.discard(session)
            for session in touched:
                self._bound_session(connection, session)
            if prune:
                self._bound_all(connection, now)

        self.store.run_atomically(body)

    def _bound_session(self, connection: Any, session: str) -> None:
        count, total = self.store._first(connection, _SESSION_TOTALS, (session,))
        if count <= self.local.max_session_events and total <= self.local.max_session_bytes:
            return
        kept = kept_bytes = 0
        for seq, size in self.store._rows(connection, _SESSION_NEWEST, (session,)):
            if kept + 1 > self.local.max_session_events or kept_bytes + size > self.local.max_session_bytes:
                self.store._count(connection, "DELETE FROM mcpserver_events WHERE session = ? AND seq <= ?",
                                  (session, seq))
                return
            kept, kept_bytes = kept + 1, kept_bytes + size

    def _bound_all(self, connection: Any, now: int) -> None:
        for table in _TABLES:
            self.store._count(connection, f"DELETE FROM {table} WHERE at < ?", (now - KEEP_MS,))
        over = self.store._first(connection, _OLDEST_OVER, (self.max_stored_bytes,))
        if over is not None:
            self.store._count(connection, "DELETE FROM mcpserver_events WHERE seq <= ?", (over[0],))

    # --- reads ----------------------------------------------------------------------------------------------------

    def recent(self, session: str, stream: str, after: int) -> Optional[Replay]:
        return self.local.recent(session, stream, after)

    def replay(self, session: str, stream: str, after: int) -> Optional[Replay]:
        found = self.local.recent(session, stream, after)
        if found is not None:  # this process's own stream: memory holds all the database would
            return found

        def read(connection: Any) -> Optional[tuple[Replay, int]]:
            row = self.store._first(connection, _STREAM, (session, stream))
            if row is None or after < 0 or (after > row[1] and (row[2] or row[0] is None)):
                return None
            request_id, head, final, at = row
            request = None if request_id is None else json.loads(request_id)
            if after > head:  # a request's stream whose carrier had sent this before its batch reached us
                return Replay([], after, False, request, False), int(at)
            # Read after the head, so events a batch committed meanwhile are past it: left for the next read.
            events = [(int(number), bytes(data)) for number, data
                      in self.store._rows(connection, _EVENTS_AFTER, (session, stream, after, head))]
            return Replay(events, int(head), bool(final), request, len(events) != head - after), int(at)

        deadline = time.monotonic() + REPLAY_WAIT_SECONDS
        while True:
            stored = self.store._run(read)
            if stored is not None or time.monotonic() >= deadline:
                break
            time.sleep(REPLAY_POLL_SECONDS)
        if stored is None:
            return None
        replay, at = stored
        if not replay.final and replay.request_id is not None:
            replay.abandoned = self._watched.still((session, stream), (replay.head, at))
        return replay

    def subscriptions(self, session: str) -> set[str]:
        rows = self.store._run(lambda c: self.store._rows(c, _SUBSCRIPTIONS, (session,)))
        return {str(uri) for uri, in rows}

    def subscribe(self, session: str, uri: str, subscribed: bool) -> None:
        if subscribed:
            sql = ("INSERT INTO mcpserver_subscriptions (session, uri, at) VALUES (?, ?, ?)"
                   " ON CONFLICT (session, uri) DO UPDATE SET at = excluded.at")
            parameters: tuple[Any, ...] = (session, uri, self.store.now())
        else:
            sql, parameters = "DELETE FROM mcpserver_subscriptions WHERE session = ? AND uri = ?", (session, uri)
        self.store._run(lambda c: self.store._count(c, sql, parameters))


class _Watched:
    """Whether the open streams of requests other processes carry are still carried. A carrier touches its open
    streams every CARRY_SECONDS, so one whose head and touch have not moved for ABANDONED_SECONDS of this
    process's monotonic clock has no carrier left (it was killed, or lost the database): judged by what moves,
    never by comparing a time it wrote with this host's clock, which either host may have stepped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._seen: dict[tuple[str, str], tuple[tuple[int, int], float]] = {}

    def still(self, key: tuple[str, str], state: tuple[int, int]) -> bool:
        """Whether the stream `key`, now at `state` (its head and last touch), has stood still long enough."""
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or seen[0] != state:
                if len(self._seen) >= MAX_WATCHED:  # the oldest first seen go: a bounded table
                    for old in sorted(self._seen, key=lambda k: self._seen[k][1])[: MAX_WATCHED // 2]:
                        del self._seen[old]
                self._seen[key] = (state, now)
                return False
            return now - seen[1] >= ABANDONED_SECONDS
