"""A request answered as a server-sent-events stream: progress, subscriptions/listen, and a legacy session's
standalone GET stream.
"""

from __future__ import annotations

import threading
import time

from .. import protocol
from .._context import Flight
from .._server import Server
from .._wire import status_line
from ._response import Response

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Optional

    from ..legacy import LegacyPeer
    from ._response import Logged, StartResponse

__all__ = ["SSE_BACKLOG", "SSE_HEADERS", "SSE_KEEPALIVE_SECONDS", "STREAMED", "Stream"]

STREAMED = frozenset({"text/event-stream", "*/*"})  # an Accept with one of these takes an SSE answer
SSE_KEEPALIVE_SECONDS = 15.0  # a comment this often on a quiet stream: proxies keep it, a gone client is noticed


SSE_BACKLOG = 256  # notifications a stream may hold for a slow client before it keeps only the latest of each


SSE_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no")]


_KEEPALIVE = b": keep-alive\n\n"


class Stream:
    """A request answered as an SSE stream: its notifications as they happen, then its response.

    Progress streams and subscriptions/listen use it. The response commits to text/event-stream
    with the first notification (or after SSE_KEEPALIVE_SECONDS of silence); a reply that comes
    first goes out as plain JSON with its own status, so 400 and 404 errors are never inside a
    stream (WIRE.md §16.7). Frames are `data: <one-line JSON>` with no event ids. Closing the
    stream cancels the request. Past SSE_BACKLOG notifications not yet written, they are
    coalesced (the latest progress, one list_changed per list, one updated per URI): a client that
    never reads costs bounded memory, and a tool that reports progress faster than the stream can
    be written (a tight loop can report 500,000 a second; measured in docs/performance.md) sends
    its latest state, not a queue.

    Two ways to be driven. Pushed (environ["mcpserver.push"]): the server calls on_ready(wake)
    once on one of its workers, where the request runs (a progress stream's tool; a listen
    request only opens its listener and returns), and calls next() whenever wake() was called or
    poll_interval has passed; next() never blocks (b"" when there is nothing to send), so a quiet
    stream holds no thread. Iterated (any other WSGI server): the request runs on a thread of its
    own and iteration blocks until there is something to send, as today's WSGI servers expect.
    """

    probe = _KEEPALIVE  # what a server may send between pieces at any time: an SSE comment

    def __init__(self, server: Server, request: Optional[protocol.Request], headers: dict[str, str],
                 environ: dict[str, Any], principal: Any = None, on_close: Optional[Callable[[], None]] = None, *,
                 peer: Optional[LegacyPeer] = None):
        """`request` None: a legacy session's standalone stream (GET), which only `peer`'s session-wide
        notifications use. With `peer` (a legacy session), a disconnect is not a cancel (LEGACY.md §8)."""
        self._changed = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._compact_at = SSE_BACKLOG
        self._reply: Optional[protocol.Reply] = None
        self._over = False  # answered, or cancelled
        self._committed = False  # the status and headers went out
        self._finished = False  # the last piece went out
        self._closed = False
        self._wake: Optional[Callable[[], None]] = None
        self._on_close = on_close
        self._begin: Callable[[int, list[tuple[str, str]]], None] = lambda status, headers: None
        self.poll_interval = SSE_KEEPALIVE_SECONDS
        self._last_sent = time.monotonic()
        self._push = bool(environ.get("mcpserver.push"))
        self._request = request
        self._server = server
        self._headers = headers
        self._peer = peer
        self.flight = Flight(self._note, principal)
        self.flight.on_cancel(self._end)
        on_disconnect = environ.get("mcpserver.on_disconnect")
        if on_disconnect is not None and peer is None:
            on_disconnect(self.flight.cancel)
        elif on_disconnect is not None and request is None:  # the standalone stream ends with its connection
            on_disconnect(self.close)

    def send(self, start_response: StartResponse, logged: Logged) -> Iterable[bytes]:
        def begin(status: int, headers: list[tuple[str, str]]) -> None:
            line = status_line(status)
            start_response(line, headers)
            logged(line if headers is not SSE_HEADERS else f"{status} (stream)")

        self._begin = begin
        if self._push:
            return self
        threading.Thread(target=self._work, name="mcpserver-stream", daemon=True).start()
        return self._iterated()

    def _work(self) -> None:
        """Run the request; a listen request returns at once, its end answered when the listener ends."""
        if self._request is None:  # the standalone stream: the session's notifications, until it closes
            assert self._peer is not None
            self._peer.attach(self._note)
            if self._wake is not None:
                self._wake()  # its headers go out at once: the client is waiting for them
            return
        if self._peer is not None:
            forget = self._peer.track(self._request.id, self.flight)
            try:
                reply = protocol.dispatch(self._request, self._server, flight=self.flight, peer=self._peer)
            finally:
                forget()
            self._answer(reply)
            return
        reply = protocol.dispatch(self._request, self._server, self._headers, flight=self.flight)
        listening = reply.listening
        if listening is not None:  # open until cancelled or the server stops
            listening.on_end(lambda: self._answer(listening.close()))
        else:
            self._answer(reply)

    def end_after(self, seconds: float) -> None:
        """End the stream after `seconds` (a legacy session's GET stream under --max-listen-seconds): what is
        pending goes out, then the response ends, as when its session ends."""
        from .. import _deadlines

        cancel = _deadlines.after(seconds, self._end)
        release = self._on_close

        def closed() -> None:
            cancel()
            if release is not None:
                release()

        self._on_close = closed

    def _answer(self, reply: protocol.Reply) -> None:
        if not self.flight.finish(lambda: self._end(reply)):
            self._end()

    def _note(self, note: dict[str, Any]) -> None:
        with self._changed:
            self._pending.append(note)
            if len(self._pending) > self._compact_at:  # the client is not keeping up: keep the latest of each kind
                latest: dict[tuple[Any, ...], dict[str, Any]] = {}
                for pending in self._pending:
                    params = pending.get("params") or {}
                    latest[(pending.get("method"), params.get("uri"), params.get("progressToken"))] = pending
                self._pending = list(latest.values())
                self._compact_at = max(SSE_BACKLOG, 2 * len(self._pending))  # amortised: never quadratic
            self._changed.notify()
            wake = self._wake
        if wake is not None:
            wake()

    def _end(self, reply: Optional[protocol.Reply] = None) -> None:
        with self._changed:
            self._reply, self._over = reply, True
            self._changed.notify()
            wake = self._wake
        if wake is not None:
            wake()

    # -- pushed -------------------------------------------------------------------------------------

    def on_ready(self, wake: Callable[[], None]) -> None:
        with self._changed:
            self._wake = wake
        self._work()

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._finished:
            raise StopIteration
        with self._changed:
            notes, self._pending = self._pending, []
            reply, over = self._reply, self._over
        if not (notes or over) and time.monotonic() - self._last_sent < self.poll_interval \
                and (self._committed or self._request is not None):
            return b""  # woken early, or polled before the stream fell quiet for long: nothing yet
        return self._piece(notes, reply, over)

    # -- iterated -----------------------------------------------------------------------------------

    def _iterated(self) -> Iterator[bytes]:
        try:
            while not self._finished:
                with self._changed:
                    if not (self._pending or self._over) and (self._committed or self._request is not None):
                        self._changed.wait(self.poll_interval)
                    notes, self._pending = self._pending, []
                    reply, over = self._reply, self._over
                yield self._piece(notes, reply, over)
        finally:
            self.close()

    # -- both ---------------------------------------------------------------------------------------

    def _piece(self, notes: list[dict[str, Any]], reply: Optional[protocol.Reply], over: bool) -> bytes:
        """What to send next: the plain JSON answer, or SSE frames (a comment when there is nothing)."""
        if not self._committed and over and not notes:  # answered before any notification: plain JSON
            response = Response.json(reply)
            self._committed = self._finished = True
            self._begin(response.status, response.headers)
            return response.body
        if not self._committed:
            self._committed = True
            self._begin(200, SSE_HEADERS)
        frames = [b"data: " + protocol.encode(note) + b"\n\n" for note in notes]
        if over:
            self._finished = True
            if reply is not None and reply.response is not None:
                frames.append(b"data: " + protocol.encode(reply.response) + b"\n\n")
        self._last_sent = time.monotonic()
        return b"".join(frames) or _KEEPALIVE

    def close(self) -> None:
        """The response is over, or its client gone: stop the request (a no-op once answered)."""
        if self._closed:
            return
        self._closed = True
        if self._peer is not None and self._request is None:
            self._peer.detach()
        if self._peer is None or self._request is None:  # a legacy call goes on without its stream
            self.flight.cancel()
        if self._on_close is not None:
            self._on_close()
