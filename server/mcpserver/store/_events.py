"""What a legacy session keeps beyond one connection (LEGACY.md §4.4): its SSE streams' events, for a client that
reconnects with Last-Event-ID, and its resource subscriptions. SessionStore is the interface, MemorySessionStore the
default; the SQL task stores keep the same in their database (SqlSessionStore), so another process replays too.

Rules of this module:
- Everything is keyed by the session (its key: the random nonce sealed inside its id, so only the session's own
  requests can name it) and, for events, by the stream: whatever event id a client sends, it reads only streams
  of the session it authenticated as.
- A stream's events are numbered from 1; 0 is the priming id, "before the first". A stream ends after its final
  event (the response of the request it answers), or when ended without one (the request was cancelled).
- Bounded per session, by count (MAX_SESSION_EVENTS) and bytes (MAX_SESSION_EVENT_BYTES): past either, the oldest
  events of the session go. A replay that needs one of them says so (`missed`), never skips it silently; an event
  larger than the byte bound is never kept, and counts as missed. The memory store is bounded across sessions too
  (MAX_SESSIONS, MAX_EVENT_BYTES).
- `recent` never waits (it runs on the HTTP server's loop); `replay` may (it reads the database).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from .._forks import renew_at_fork

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["MAX_EVENT_BYTES", "MAX_SESSIONS", "MAX_SESSION_EVENTS", "MAX_SESSION_EVENT_BYTES", "MemorySessionStore",
           "Replay", "SessionStore"]

MAX_SESSION_EVENTS = 1000  # events one session keeps, all its streams together
MAX_SESSION_EVENT_BYTES = 8 * 1024 * 1024  # ... and their bytes: room for a 5 MB result
MAX_SESSIONS = 1000  # sessions the memory store remembers (as many as a process keeps living states for)
MAX_EVENT_BYTES = 64 * 1024 * 1024  # the memory store's events, every session together


class Replay:
    """A stream's events after a point, as a store holds them."""

    __slots__ = ("abandoned", "events", "final", "head", "missed", "request_id")

    def __init__(self, events: list[tuple[int, bytes]], head: int, final: bool, request_id: Any, missed: bool,
                 abandoned: bool = False):
        self.events = events  # (number, the message's JSON), in order
        self.head = head  # the number of the stream's last event
        self.final = final  # the stream has ended: nothing comes after `head`
        self.request_id = request_id  # the request a POSTed stream answers; None for a session's GET stream
        self.missed = missed  # events after the point were dropped past the bound
        self.abandoned = abandoned  # not final, and the process that carried it stopped (SqlSessionStore)


class SessionStore:
    """The interface: a session's streams' events and its subscriptions."""

    def open_stream(self, session: str, stream: str, request_id: Any = None) -> None:
        raise NotImplementedError

    def append(self, session: str, stream: str, number: int, data: bytes, final: bool = False) -> None:
        """Keeps event `number` (one more than the last) of a stream; `final`: the stream ends with it."""
        raise NotImplementedError

    def end_stream(self, session: str, stream: str) -> None:
        """The stream ends without a final event (its request was cancelled: nothing more will come)."""
        raise NotImplementedError

    def recent(self, session: str, stream: str, after: int) -> Optional[Replay]:
        """This process's own events of the stream after `after`, without waiting; None if it has none of it."""
        raise NotImplementedError

    def replay(self, session: str, stream: str, after: int) -> Optional[Replay]:
        """The stream's events after `after`, wherever they were written; None when the session has no such
        stream (another session's, forged, or long gone) or `after` is past its end."""
        return self.recent(session, stream, after)

    def subscriptions(self, session: str) -> set[str]:
        raise NotImplementedError

    def subscribe(self, session: str, uri: str, subscribed: bool) -> None:
        raise NotImplementedError

    def end(self, session: str) -> None:
        """The session ended: its events and subscriptions go."""
        raise NotImplementedError


class _Stream:
    __slots__ = ("final", "head", "request_id")

    def __init__(self, request_id: Any):
        self.head = 0
        self.final = False
        self.request_id = request_id


class _KeptSession:
    __slots__ = ("bytes", "events", "streams", "uris")

    def __init__(self) -> None:
        self.streams: dict[str, _Stream] = {}
        self.events: deque[list[Any]] = deque()  # [stream, number, data, this record], oldest first
        self.bytes = 0
        self.uris: set[str] = set()


class MemorySessionStore(SessionStore):
    """In this process's memory: what one process (or every process, for its own streams) keeps."""

    def __init__(self, *, max_session_events: int = MAX_SESSION_EVENTS,
                 max_session_bytes: int = MAX_SESSION_EVENT_BYTES, max_sessions: int = MAX_SESSIONS,
                 max_bytes: int = MAX_EVENT_BYTES):
        self.max_session_events = max_session_events
        self.max_session_bytes = max_session_bytes
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        renew_at_fork(self, "_lock")
        self._sessions: OrderedDict[str, _KeptSession] = OrderedDict()  # least recently used first
        self._order: deque[list[Any]] = deque()  # every kept event, oldest first (an entry's data is None once gone)
        self._bytes = 0

    def _session(self, session: str) -> _KeptSession:
        """The session's record, made if new, and now the most recently used (under the lock)."""
        found = self._sessions.get(session)
        if found is None:
            found = self._sessions[session] = _KeptSession()
            while len(self._sessions) > self.max_sessions:
                self._drop_session(self._sessions.popitem(last=False)[1])
        else:
            self._sessions.move_to_end(session)
        return found

    def _drop_session(self, record: _KeptSession) -> None:
        for entry in record.events:
            self._bytes -= len(entry[2])
            entry[2] = None
        record.events.clear()

    def open_stream(self, session: str, stream: str, request_id: Any = None) -> None:
        with self._lock:
            self._session(session).streams.setdefault(stream, _Stream(request_id))

    def carried(self) -> list[tuple[str, str]]:
        """(session, stream) of every request's stream kept here that has not ended: the calls this process runs."""
        with self._lock:
            return [(session, stream) for session, record in self._sessions.items()
                    for stream, kept in record.streams.items() if kept.request_id is not None and not kept.final]

    def append(self, session: str, stream: str, number: int, data: bytes, final: bool = False) -> None:
        with self._lock:
            record = self._session(session)
            kept = record.streams.setdefault(stream, _Stream(None))
            kept.head, kept.final = number, final
            if len(data) > self.max_session_bytes:  # never kept: a replay that needs it says it was missed
                return
            entry = [stream, number, data, record]
            record.events.append(entry)
            self._order.append(entry)
            record.bytes += len(data)
            self._bytes += len(data)
            while len(record.events) > self.max_session_events or record.bytes > self.max_session_bytes:
                oldest = record.events.popleft()
                record.bytes -= len(oldest[2])
                self._bytes -= len(oldest[2])
                oldest[2] = None
            while self._bytes > self.max_bytes:  # the globally oldest is its own session's oldest too
                oldest = self._order.popleft()
                if oldest[2] is None:
                    continue
                owner = oldest[3]
                owner.events.popleft()
                owner.bytes -= len(oldest[2])
                self._bytes -= len(oldest[2])
                oldest[2] = None
            while self._order and self._order[0][2] is None:
                self._order.popleft()

    def end_stream(self, session: str, stream: str) -> None:
        with self._lock:
            kept = self._session(session).streams.get(stream)
            if kept is not None:
                kept.final = True

    def recent(self, session: str, stream: str, after: int) -> Optional[Replay]:
        with self._lock:
            record = self._sessions.get(session)
            kept = None if record is None else record.streams.get(stream)
            if record is None or kept is None or after > kept.head or after < 0:
                return None
            events = []
            for name, number, data, _ in reversed(record.events):  # newest first: a reader that keeps up stops soon
                if name == stream:
                    if number <= after:
                        break
                    events.append((number, data))
            events.reverse()
            missed = len(events) != kept.head - after  # numbers only grow: as many as that means none is missing
            return Replay(events, kept.head, kept.final, kept.request_id, missed)

    def subscriptions(self, session: str) -> set[str]:
        with self._lock:
            record = self._sessions.get(session)
            return set(record.uris) if record is not None else set()

    def subscribe(self, session: str, uri: str, subscribed: bool) -> None:
        with self._lock:
            uris = self._session(session).uris
            if subscribed:
                uris.add(uri)
            else:
                uris.discard(uri)

    def end(self, session: str) -> None:
        with self._lock:
            record = self._sessions.pop(session, None)
            if record is not None:
                self._drop_session(record)
