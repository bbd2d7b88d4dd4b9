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
"""

from __future__ import annotations

from .. import protocol
from .._context import Flight
from .._wire import HEADER_SESSION, META_VERSION
from ..errors import InternalError, InvalidParams, InvalidRequest
from ..legacy import LegacyPeer, SessionTable
from ._response import Response, json_parts, printable
from ._stream import STREAMED, Stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union

    from ._app import Admitted, McpApp

__all__ = ["Sessions", "modern"]


def modern(request: protocol.Request) -> bool:
    """Whether a request carries the 2026-07-28 `_meta` (a request of that revision, whatever else it says)."""
    meta = request.params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


class Sessions:
    """The legacy sessions of one McpApp: its table, and how their requests are answered."""

    def __init__(self, app: McpApp):
        self.app = app
        self.table = SessionTable(app.server, app.server.sealer)

    def initialize(self, request: protocol.Request, admitted: Admitted) -> Response:
        """initialize opens a legacy session; its id (Mcp-Session-Id) carries what was negotiated."""
        reply = protocol.dispatch(request, self.app.server)
        if reply.session is None:  # refused (malformed): no session
            return Response.json(reply)
        try:
            session_id = self.table.open(reply.session, admitted.principal_key or "")
        except ValueError as too_large:
            refused = InvalidParams(f"Invalid params: {too_large}")
            return Response.json(protocol.Refusal(refused, request.id).reply)
        response = Response.json(reply)
        response.headers.append((HEADER_SESSION, session_id))
        return response

    def serve(self, session_id: str, environ: dict[str, Any], admitted: Admitted) -> Union[Response, Stream]:
        method = environ.get("REQUEST_METHOD")
        message = protocol.parse(self.app.read_body(environ, admitted.length)) if method == "POST" else None
        if isinstance(message, protocol.Request) and modern(message):  # 2026-07-28 knows no sessions: served
            return self.app.serve_request(message, environ, admitted)
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
        streams = bool(admitted.accepted & {"text/event-stream", "*/*"})
        if message.work == protocol.AUTHOR and streams:  # it may ask the client, log or report progress
            return Stream(self.app.server, message, {}, environ, admitted.principal, peer=peer)
        flight = Flight(principal=admitted.principal)
        forget = peer.track(message.id, flight)  # a disconnect is not a cancel here (LEGACY.md §8)
        try:
            return Response.json(protocol.dispatch(message, self.app.server, flight=flight, peer=peer))
        finally:
            forget()

    def _stream(self, peer: LegacyPeer, environ: dict[str, Any], admitted: Admitted) -> Union[Response, Stream]:
        """GET: the session's standalone stream, for what concerns no request (list changes, updates)."""
        subscriptions = self.app.server.subscriptions
        if not subscriptions.enabled:  # --no-listen: nothing would ever be sent on it (LEGACY.md: 405)
            return Response.plain(405, "This server sends no notifications: there is no standalone stream",
                                  ("Allow", "POST, DELETE"))
        if admitted.accepted.isdisjoint(STREAMED):
            return Response.plain(406, "The standalone stream is text/event-stream; accept it")
        try:
            release = self.app.listen_slot(environ, admitted)
        except InternalError as full:
            return Response.plain(503, full.message, ("Retry-After", "1"))
        stream = Stream(self.app.server, None, {}, environ, admitted.principal, release, peer=peer)
        if subscriptions.max_seconds is not None:  # bounded as a listen stream is; the client opens another
            stream.end_after(subscriptions.max_seconds)
        return stream
