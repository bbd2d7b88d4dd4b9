"""The legacy era over HTTP (LEGACY.md §4): initialize opens a session whose id (Mcp-Session-Id) carries what was
negotiated, sealed, so any replica sharing the key serves the session's plain requests; then the session's POSTs,
its standalone GET stream and its DELETE.

Rules of this module:
- A request that carries the 2026-07-28 `_meta` is served as that revision, session id or not: it knows no
  sessions.
- An unknown, ended, expired or forged session id, or another principal's, is 404: the client starts a new
  session. A POST whose MCP-Protocol-Version is not the session's revision is 400.
- The client's answers to the server's own requests (elicitation, sampling, roots) and its cancels reach the
  session's peer; a disconnect is not a cancel (LEGACY.md §8).
- The GET stream is bounded like a listen stream: per peer and per principal.
- Every stream of a session is resumable (mcpserver.http._channel): its events carry ids and are kept in the
  session store, and a GET with Last-Event-ID replays what followed that event on its stream, in order, then
  goes on with the stream where it is carried (this process), or ends for the client to poll again (another
  process carries it). 2025-11-25 streams open with a priming event. An id that names no stream of this session
  (another session's, forged, expired) is 400 and replays nothing. When events the client needs were dropped
  past the store's bound it is told: a session's stream is followed by what to re-read (every list, every
  subscribed resource); a request whose response was dropped gets an error response saying so.
"""

from __future__ import annotations

import threading

from .. import protocol
from .._context import Flight
from .._forks import renew_at_fork
from .._wire import HEADER_SESSION, META_VERSION
from ..errors import InternalError, InvalidParams, InvalidRequest
from ..legacy import LegacyPeer, SessionTable
from ._channel import SSE_RETRY_MS, Channel, frame, parse_event_id
from ._response import Response, json_parts, printable
from ._stream import STREAMED, Stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, Union

    from .._server import Server
    from ._response import Admitted

__all__ = ["PRIMED", "Sessions", "modern"]

PRIMED = frozenset({"2025-11-25"})  # revisions whose streams open with a priming event (an id, no data)
_STANDALONE = "get"  # the key of a session's GET stream among its channels (the others: by stream id)


def modern(request: protocol.Request) -> bool:
    """Whether a request carries the 2026-07-28 `_meta` (a request of that revision, whatever else it says)."""
    meta = request.params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


class Sessions:
    """The legacy sessions of one McpApp: its table, and how their requests are answered. Of the app it is given
    what it uses: how to read a body, how to serve a 2026-07-28 request, a listen slot, what to do when a session
    opens (count it), and the refusal of a request whose token lacks an entry's scopes."""

    def __init__(self, server: Server, *, read_body: Callable[[dict[str, Any], int], bytes],
                 serve_request: Callable[[protocol.Request, dict[str, Any], Admitted], Union[Response, Stream]],
                 listen_slot: Callable[[dict[str, Any], Admitted], Callable[[], None]], opened: Callable[[], None],
                 lacking_scope: Callable[[protocol.Request, Admitted], Optional[Response]]):
        self.server = server
        self.read_body, self.serve_request = read_body, serve_request
        self.listen_slot, self.opened, self.lacking_scope = listen_slot, opened, lacking_scope
        self.table = SessionTable(server, server.sealer)
        self._lock = threading.Lock()  # a session's channels
        renew_at_fork(self, "_lock")

    def initialize(self, request: protocol.Request, admitted: Admitted) -> Response:
        """initialize opens a legacy session; its id (Mcp-Session-Id) carries what was negotiated."""
        reply = protocol.dispatch(request, self.server)
        if reply.session is None:  # refused (malformed): no session
            return Response.json(reply)
        try:
            session_id = self.table.open(reply.session, admitted.principal_key or "")
        except ValueError as too_large:
            refused = InvalidParams(f"Invalid params: {too_large}")
            return Response.json(protocol.Refusal(refused, request.id).reply)
        self.opened()
        response = Response.json(reply)
        response.headers.append((HEADER_SESSION, session_id))
        return response

    def serve(self, session_id: str, environ: dict[str, Any], admitted: Admitted) -> Union[Response, Stream]:
        method = environ.get("REQUEST_METHOD")
        message = protocol.parse(self.read_body(environ, admitted.length)) if method == "POST" else None
        if isinstance(message, protocol.Request) and modern(message):  # 2026-07-28 knows no sessions: served
            return self.serve_request(message, environ, admitted)
        peer = self.table.find(session_id, admitted.principal_key or "")
        if peer is None:  # unknown, ended, expired, forged, or another principal's: start a new one
            return Response.plain(404, "No such session: send initialize again, without Mcp-Session-Id")
        if method == "DELETE":
            self.table.end(session_id)
            return Response(204, [("Content-Length", "0")])
        if method == "GET":
            return self._stream(peer, environ, admitted)
        version = environ.get("HTTP_MCP_PROTOCOL_VERSION", "").strip(" \t")
        if version and version != peer.session.revision:  # LEGACY.md §4.5: not the session's revision
            refused = InvalidRequest(f"Invalid Request: MCP-Protocol-Version {printable(version)!r} is not this "
                                     f"session's ({peer.session.revision})")
            return Response(400, *json_parts(protocol.Refusal(refused).reply))
        return self._message(peer, message, environ, admitted)

    def _message(self, peer: LegacyPeer, message: Any, environ: dict[str, Any],
                 admitted: Admitted) -> Union[Response, Stream]:
        if isinstance(message, protocol.Refusal):
            return Response.json(message.reply)
        if isinstance(message, protocol.ClientResponse):
            if peer.answer(message):
                return Response.json(None)
            return Response.plain(400, "No request of this session is waiting for that id")
        if isinstance(message, protocol.Cancel):
            peer.cancel(message.request_id)
            return Response.json(None)
        if isinstance(message, protocol.Notification):
            if message.method == "notifications/initialized":
                peer.initialized = True
            return Response.json(None)
        lacking = self.lacking_scope(message, admitted)  # a refusal the session outlives: the client steps up
        if lacking is not None:
            return lacking
        streams = bool(admitted.accepted & {"text/event-stream", "*/*"})
        if message.work == protocol.AUTHOR and streams:  # it may ask the client, log or report progress
            return Stream(self.server, message, {}, environ, admitted.principal, peer=peer,
                          channel=self._channel(peer, message.id), prime=peer.session.revision in PRIMED)
        flight = Flight(principal=admitted.principal)
        forget = peer.track(message.id, flight)  # a disconnect is not a cancel here (LEGACY.md §8)
        try:
            return Response.json(protocol.dispatch(message, self.server, flight=flight, peer=peer))
        finally:
            forget()

    def _stream(self, peer: LegacyPeer, environ: dict[str, Any], admitted: Admitted) -> Union[Response, Stream]:
        """GET: the session's standalone stream, for what concerns no request (list changes, updates); with
        Last-Event-ID, the stream that event was on, resumed after it."""
        subscriptions = self.server.subscriptions
        if not subscriptions.enabled:  # --no-listen: nothing would ever be sent on it (LEGACY.md: 405)
            return Response.plain(405, "This server sends no notifications: there is no standalone stream",
                                  ("Allow", "POST, DELETE"))
        if admitted.accepted.isdisjoint(STREAMED):
            return Response.plain(406, "The standalone stream is text/event-stream; accept it")
        last = environ.get("HTTP_LAST_EVENT_ID")
        resumed = parse_event_id(last) if last is not None else None
        try:
            replay = None if resumed is None else self.table.store.replay(peer.key or "", *resumed)
        except InternalError as unavailable:  # the store's database is down: the client retries, the id still good
            return Response.plain(503, unavailable.message, ("Retry-After", "1"))
        if last is not None and replay is None:
            refused = InvalidRequest(f"Invalid Request: Last-Event-ID {printable(last)[:80]!r} names no event of this "
                                     "session's streams, so nothing was replayed (an id of another session, a forged "
                                     "one, or one whose stream has expired); open the stream without it")
            return Response(400, *json_parts(protocol.Refusal(refused).reply))
        try:
            release = self.listen_slot(environ, admitted)
        except InternalError as full:
            return Response.plain(503, full.message, ("Retry-After", "1"))
        stream = self._opened(peer, environ, admitted.principal, release, resumed, replay)
        if subscriptions.max_seconds is not None:  # bounded as a listen stream is; the client opens another
            stream.end_after(subscriptions.max_seconds)
        return stream

    def _opened(self, peer: LegacyPeer, environ: dict[str, Any], principal: Any, release: Any,
                resumed: Any, replay: Any) -> Stream:
        server = self.server
        if resumed is None or replay is None:  # a fresh stream: what the session hears from now on
            channel = self._standalone(peer)
            return Stream(server, None, {}, environ, principal, release, peer=peer, channel=channel,
                          cursor=channel.head, prime=peer.session.revision in PRIMED)
        stream_id = resumed[0]
        preface = [frame(f"{stream_id}-{number}", data) for number, data in replay.events]
        carried = peer.streams.get(stream_id)
        if replay.request_id is None:  # a GET stream: it goes on with this process's, which hears the same
            channel = carried or self._standalone(peer)
            cursor = replay.head if carried is not None else channel.head
            if replay.missed:
                peer.resync()  # into the channel, after the replay: re-read what the missed events said
            return Stream(server, None, {}, environ, principal, release, peer=peer, channel=channel, cursor=cursor,
                          preface=preface)
        if carried is not None:  # a request's stream, still carried here: it goes on to its response
            return Stream(server, None, {}, environ, principal, release, peer=peer, channel=carried,
                          cursor=replay.head, preface=preface)
        after = self._carried_elsewhere(peer, stream_id, replay)
        if after:
            preface.append(after)
        return Stream(server, None, {}, environ, principal, release, peer=peer, preface=preface)

    def _carried_elsewhere(self, peer: LegacyPeer, stream_id: str, replay: Any) -> bytes:
        """What follows the replay of a request's stream another process carries, or carried: nothing after its
        response; an error for the request when its response was dropped past the bound, or when its carrier
        stopped before answering (killed, say: it never comes, and every replica replays the same end); else
        `retry:`, and the client polls again (2025-11-25 SSE polling)."""
        if replay.final and replay.missed and not (replay.events and replay.events[-1][0] == replay.head):
            from ..store import MAX_SESSION_EVENT_BYTES, MAX_SESSION_EVENTS

            lost = InternalError(f"Internal error: the response to this request was dropped from the session's "
                                 f"event store before the client read it (it keeps {MAX_SESSION_EVENTS} events and "
                                 f"{MAX_SESSION_EVENT_BYTES} bytes per session)")
            return frame(f"{stream_id}-{replay.head}",
                         protocol.encode(protocol.Refusal(lost, replay.request_id).reply.response or {}))
        if replay.final:
            return b""
        if replay.abandoned:
            gone = InternalError("Internal error: the server process that ran this request stopped before it "
                                 "answered (it was killed, or lost the session store); send the request again")
            data = protocol.encode(protocol.Refusal(gone, replay.request_id).reply.response or {})
            self.table.store.append(peer.key or "", stream_id, replay.head + 1, data, final=True)
            return frame(f"{stream_id}-{replay.head + 1}", data)
        return f"retry: {SSE_RETRY_MS}\n\n".encode()

    def _standalone(self, peer: LegacyPeer) -> Channel:
        """The session's GET stream in this process: made with the first GET, it carries the session's
        notifications from then on until the session ends, whether or not a connection is reading it."""
        with self._lock:
            channel: Optional[Channel] = peer.streams.get(_STANDALONE)
            made = channel is None
            if channel is None:
                channel = peer.streams[_STANDALONE] = Channel(self.table.store, peer.key or "")
                peer.streams[channel.stream] = channel
        if made:
            peer.attach(channel.emit)
            peer.on_close(channel.end)
        return channel

    def _channel(self, peer: LegacyPeer, request_id: Any) -> Channel:
        """The stream a POSTed request is answered on; the session knows it by id until its response."""
        def ended() -> None:
            with self._lock:
                peer.streams.pop(channel.stream, None)

        channel = Channel(self.table.store, peer.key or "", request_id, on_end=ended)
        with self._lock:
            peer.streams[channel.stream] = channel
        return channel
