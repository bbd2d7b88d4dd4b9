"""The legacy era's dispatch (LEGACY.md): a request of an initialize-based revision, answered as that revision.

protocol.dispatch hands a request here, its one seam into this wing, when the client opened a legacy session
(`peer`) or opens one now (initialize, ping), and the request carries no 2026-07-28 `_meta`. Then:
- there are no _meta, header or version rules: initialize negotiates the revision once, for the session;
- the methods are the ones both eras share (mcpserver._methods) less what only 2026-07-28 has, plus
  logging/setLevel and resources/subscribe and unsubscribe;
- errors use the legacy codes: no -32020..-32022, a missing resource is -32002, HTTP status 200;
- every result is shaped for the session's revision (_shaping): what it lacks is never sent.
"""

from __future__ import annotations

from .. import _log
from .._context import Call, Cancelled, Context, Flight, Peer
from .._methods import ANSWERED, CANCELLED, METHODS, MODERN_ONLY, Reply, error_response
from .._middleware import transport_of
from .._server import Server
from ..errors import (
    RESOURCE_NOT_FOUND,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    ProtocolError,
    ResourceMissing,
)
from ._shaping import LOG_LEVELS, initialize, shape

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, Protocol

    Handler = Callable[[Server, dict[str, Any], Context], Any]

    class Request(Protocol):
        """What this dispatch reads of the request protocol.dispatch hands it (protocol.Request, above this wing)."""

        @property
        def id(self) -> Any: ...
        @property
        def method(self) -> str: ...
        @property
        def params(self) -> dict[str, Any]: ...

__all__ = ["dispatch"]

log = _log.get("mcpserver.protocol")


def dispatch(request: Request, server: Server, flight: Optional[Flight], peer: Optional[Peer]) -> Reply:
    """A request of an initialize-based revision (LEGACY.md): no _meta rules, legacy methods, legacy
    error codes, and every result shaped for the session's revision."""
    request_id, method, params = request.id, request.method, request.params
    try:
        if method == "initialize":
            if peer is not None:
                raise InvalidRequest("Invalid Request: this session is already initialized")
            result, session = initialize(params, server.info, server.capabilities(), server.instructions)
            return Reply({"jsonrpc": "2.0", "id": request_id, "result": result}, session=session)
        if method == "ping":
            return Reply({"jsonrpc": "2.0", "id": request_id, "result": {}})
        if peer is None:
            raise InvalidRequest("Invalid Request: the session is not initialized: send initialize first")
        run = _method(method, server)
        meta = params.get("_meta")
        context = Context(request_id, meta if isinstance(meta, dict) else {}, flight, method, peer=peer)
        through = server.middleware.run
        if through is None:
            result = run(server, params, context)
        else:
            call = Call(request_id, method, params, context.principal, transport_of(None, flight, peer),
                        peer.session.revision)
            result = through(call, run, server, params, context)
        return Reply({"jsonrpc": "2.0", "id": request_id, "result": shape(method, result, peer.session)})
    except MissingClientCapability as exc:
        if method != "tools/call":
            return _error(request_id, InvalidRequest(f"Invalid Request: {exc.message}", data=exc.data))
        return Reply({"jsonrpc": "2.0", "id": request_id,
                      "result": {"content": [{"type": "text", "text": exc.message}], "isError": True}})
    except ProtocolError as exc:
        return _error(request_id, exc)
    except Cancelled:
        return Reply(None, CANCELLED)
    except Exception:
        log.exception("internal error answering %r (id %r)", method, request_id)
        return _error(request_id, InternalError("Internal error"))


def _error(request_id: Any, error: ProtocolError) -> Reply:
    """Legacy error responses: no modern codes (-32020..-32022 do not exist there), a missing resource is
    -32002, and the HTTP status is the binding's default, 200 (LEGACY.md §10)."""
    response = error_response(request_id, error)
    if isinstance(error, ResourceMissing):
        response["error"]["code"] = RESOURCE_NOT_FOUND
    return Reply(response, ANSWERED, 200)


def _method(method: str, server: Server) -> Handler:
    entry = _LEGACY_METHODS.get(method) or (METHODS.get(method) if method not in MODERN_ONLY else None)
    if entry is None:
        raise MethodNotFound(f"Method not found: {method}")
    capability, run = entry
    if capability is not None and not server.offers_capability(capability):
        raise MethodNotFound(f"Method not found: {method} (the server has no {capability})")
    return run


def _set_level(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    level = params.get("level")
    levels = LOG_LEVELS
    if level not in levels:
        raise InvalidParams(f"Invalid params: level must be one of {', '.join(levels)}")
    assert context.peer is not None
    context.peer.set_log_level(str(level))
    return {}


def _subscribe(server: Server, params: dict[str, Any], context: Context, subscribed: bool = True) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams('Invalid params: "uri" must be a string')
    if not server.subscriptions.enabled:  # --no-listen: the capabilities said no subscribe
        raise MethodNotFound(f"Method not found: resources/{'subscribe' if subscribed else 'unsubscribe'}",
                             data={"reason": "this server tells no one of changes: its capabilities say so"})
    if subscribed and not server.serves(uri):
        raise ResourceMissing("Resource not found", data={"uri": uri})
    assert context.peer is not None
    context.peer.subscribe(uri, subscribed)
    return {}


def _unsubscribe(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _subscribe(server, params, context, subscribed=False)


_LEGACY_METHODS: dict[str, tuple[Optional[str], Handler]] = {
    "logging/setLevel": (None, _set_level),
    "resources/subscribe": ("resources", _subscribe),
    "resources/unsubscribe": ("resources", _unsubscribe),
}
