"""A request answered as a server-sent-events stream: progress, subscriptions/listen, and a legacy session's
streams (its standalone GET stream, a POSTed request's stream, a stream resumed with Last-Event-ID).
"""

from __future__ import annotations

import threading
import time

from .. import protocol
from .._context import Flight
from .._server import Server
from .._wire import status_line
from ._channel import frame, priming
from ._response import Response

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Optional

    from ..legacy import LegacyPeer
    from ._channel import Channel
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
    be written (a tight loop can report 500,000 a second; measured in docs/reports/performance.md) sends
    its latest state, not a queue.

    A legacy session's streams carry a Channel instead (mcpserver.http._channel): every event has
    an id and is kept in the session store as it is emitted, the connection reads the channel from
    its cursor (so nothing is coalesced, and a disconnect loses nothing), and a 2025-11-25 stream
    opens with a priming event. `preface` is what a resumed stream replays before the channel's
    live events; without a channel it ends after it.

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
                 peer: Optional[LegacyPeer] = None, channel: Optional[Channel] = None, cursor: int = 0,
                 prime: bool = False, preface: Optional[list[bytes]] = None):
        """`request` None: a legacy session's GET, which reads `channel` from `cursor` (after `preface`)
        and runs nothing. With `peer` (a legacy session), a disconnect is not a cancel (LEGACY.md §8).
        `prime`: open with a priming event (2025-11-25)."""
        self._changed = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._compact_at = SSE_BACKLOG
        self._reply: Optional[protocol.Reply] = None  # the answer; a channel's, for plain JSON before any event
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
        self._channel = channel
        self._cursor = cursor  # the number of the channel's last event this connection sent
        self._prime = prime
        self._preface = preface or []
        self.flight = Flight(self._note if channel is None else channel.emit, principal)
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
        if self._request is None:  # a legacy GET: the channel's events, until it ends or the session does
            assert self._peer is not None
            if self._channel is not None:
                self._channel.attach(self._woken)
            self._peer.on_close(self._end)  # the session ended (DELETE, expiry): so does its stream
            self._woken()  # its headers go out at once: the client is waiting for them
            return
        if self._peer is not None:
            forget = self._peer.track(self._request.id, self.flight)
            if self._channel is not None:
                self._channel.attach(self._woken)
            if self._prime:
                self._woken()  # the priming event goes out before the call runs
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
        channel = self._channel
        if channel is None:
            if not self.flight.finish(lambda: self._end(reply)):
                self._end()
            return
        self._reply = reply  # for a plain JSON answer, if it comes before any event
        response = reply.response
        if response is None or not self.flight.finish(lambda: channel.emit(response, final=True)):
            channel.end()

    def _woken(self) -> None:
        """The channel has news (or the stream must start): the connection should send."""
        with self._changed:
            self._changed.notify()
            wake = self._wake
        if wake is not None:
            wake()

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
        if self._channel is not None or self._preface:
            if not self._has_news() and time.monotonic() - self._last_sent < self.poll_interval:
                return b""
            return self._channel_piece()
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
                if self._channel is not None or self._preface:
                    with self._changed:
                        if not self._has_news():
                            self._changed.wait(self.poll_interval)
                    yield self._channel_piece()
                    continue
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

    # -- a legacy session's streams: a channel read from a cursor ----------------------------------------

    def _has_news(self) -> bool:
        """Whether the next piece sends more than a keep-alive comment."""
        channel = self._channel
        return (not self._committed and (self._request is None or self._prime)) or bool(self._preface) \
            or self._over or (channel is not None and (channel.head > self._cursor or channel.final)) \
            or (channel is None and not self._finished)

    def _channel_piece(self) -> bytes:
        channel, frames = self._channel, []
        replay = channel.read(self._cursor) if channel is not None else None
        if not self._committed:
            if self._request is not None and not self._prime and replay is not None and replay.final \
                    and [number for number, _ in replay.events] == [1] and self._reply is not None:
                response = Response.json(self._reply)  # answered before any event: plain JSON, no stream
                self._committed = self._finished = True
                self._begin(response.status, response.headers)
                return response.body
            self._committed = True
            self._begin(200, SSE_HEADERS)
            if self._prime and channel is not None:
                frames.append(priming(channel.event_id(self._cursor)))
        frames.extend(self._preface)
        self._preface = []
        if channel is None:  # a replay of a stream this process does not carry: it ends here
            self._finished = True
        elif replay is None or replay.missed:  # fell behind past what the store keeps: end, so the client
            self._finished = True  # resumes from its last id and is told what it missed
        else:
            for number, data in replay.events:
                frames.append(frame(channel.event_id(number), data))
                self._cursor = number
            self._finished = replay.final and self._cursor == replay.head
        if self._over:
            self._finished = True
        self._last_sent = time.monotonic()
        return b"".join(frames) or _KEEPALIVE

    def close(self) -> None:
        """The response is over, or its client gone: stop the request (a no-op once answered)."""
        if self._closed:
            return
        self._closed = True
        if self._channel is not None:
            self._channel.detach(self._woken)
        if self._peer is None or self._request is None:  # a legacy call goes on without its stream
            self.flight.cancel()
        if self._on_close is not None:
            self._on_close()
