"""A legacy session's SSE stream as it outlives its connections (LEGACY.md §4.4; 2025-11-25 transports,
"Resumability and Redelivery"): its events numbered, kept in the session store, read by whichever connection
carries the stream now, so a client that lost one resumes with Last-Event-ID and misses nothing.

Rules of this module:
- An event id is `<stream>-<number>`: the stream's 64 random bits in hex, then its event's number (0: the
  priming id, before the first event). Ids are unique across the session's streams and say which stream they
  belong to; a replay looks them up within the session that asks, so another session's id, or a forged one,
  names nothing.
- Every event goes into the store as it is emitted, whether or not a connection is reading: a connection reads
  the stream from its own cursor, so a slow one never holds up the producer, and a new one continues where
  the last event it saw left off. Nothing is emitted after the final event (the request's response).
- Emitting never waits for a connection or a database (the store's `append` does not).
"""

from __future__ import annotations

import os
import threading

from .. import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

    from ..store import Replay, SessionStore

__all__ = ["SSE_RETRY_MS", "Channel", "frame", "parse_event_id", "priming"]

SSE_RETRY_MS = 1000  # what a priming event tells a client to wait before it reconnects (the SDKs' own default)
_STREAM_ID_HEX = 16  # 64 random bits: unique among one session's streams, which is all an id is looked up in
_MAX_NUMBER_DIGITS = 15


def frame(event_id: str, data: bytes) -> bytes:
    return b"id: " + event_id.encode() + b"\ndata: " + data + b"\n\n"


def priming(event_id: str) -> bytes:
    """The event a 2025-11-25 stream opens with: an id and no data, so a client can resume before the first event."""
    return f"id: {event_id}\nretry: {SSE_RETRY_MS}\ndata: \n\n".encode()


def parse_event_id(value: str) -> Optional[tuple[str, int]]:
    """(stream, number) of an id in our form; None for anything else."""
    stream, _, number = value.strip().rpartition("-")
    if len(stream) != _STREAM_ID_HEX or not all(c in "0123456789abcdef" for c in stream) \
            or not (number.isascii() and number.isdigit() and len(number) <= _MAX_NUMBER_DIGITS):
        return None
    return stream, int(number)


class Channel:
    """One stream of a session: the standalone GET stream, or the stream a POSTed request is answered on."""

    def __init__(self, store: SessionStore, session: str, request_id: Any = None,
                 on_end: Optional[Callable[[], None]] = None):
        """`on_end` is called once, when the stream ends (its final event, or end())."""
        self.stream = os.urandom(_STREAM_ID_HEX // 2).hex()
        self._on_end = on_end
        self.store = store
        self.session = session
        self.head = 0  # the number of the last event emitted
        self.final = False  # ended: nothing more will be emitted
        self._lock = threading.Lock()
        self._reader: Optional[Callable[[], None]] = None  # wakes the connection carrying the stream now
        store.open_stream(session, self.stream, request_id)

    def event_id(self, number: int) -> str:
        return f"{self.stream}-{number}"

    def emit(self, message: dict[str, Any], final: bool = False) -> None:
        """Add an event (the request's response when `final`); nothing once the stream has ended."""
        data = protocol.encode(message)
        with self._lock:  # numbers, the store's order and the end agree
            if self.final:
                return
            self.head += 1
            self.store.append(self.session, self.stream, self.head, data, final)
            self.final = final
            reader = self._reader
        if reader is not None:
            reader()
        if final and self._on_end is not None:
            self._on_end()

    def end(self) -> None:
        """No more events, and no final one (the request was cancelled, or the session ended)."""
        with self._lock:
            ended, self.final = self.final, True
            reader = self._reader
        if not ended:
            self.store.end_stream(self.session, self.stream)
        if reader is not None:
            reader()
        if not ended and self._on_end is not None:
            self._on_end()

    def read(self, after: int) -> Optional[Replay]:
        """The events after `after`, from this process's memory (never waits)."""
        return self.store.recent(self.session, self.stream, after)

    def attach(self, wake: Callable[[], None]) -> None:
        """`wake` is called after every event from now on; it replaces the connection that read before."""
        with self._lock:
            self._reader = wake

    def detach(self, wake: Callable[[], None]) -> None:
        with self._lock:
            if self._reader == wake:  # a bound method is made anew on each access: equal, not the same
                self._reader = None
