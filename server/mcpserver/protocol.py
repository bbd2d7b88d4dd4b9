"""The protocol core for the stateless MCP revision 2026-07-28: bytes in, one typed message out;
a request in, one reply out.

It never reads or writes a stream, sleeps, waits or keeps state between calls: both transports
call it, so stdio and HTTP cannot drift. Each request stands alone (WIRE.md §2). A transport calls
`parse` once per message and branches once on what it got: a `Request` goes to `dispatch`; a
`Cancel` names a request to stop; a `Notification` or a `ClientResponse` is never answered; a
`Refusal` carries the reply to send as it is.

Rules, in the order they are applied (WIRE.md §17). `headers` is None on stdio, where the header
steps do not exist; over HTTP it maps lower-case header names to values.
 1. Envelope (parse): one JSON object, "jsonrpc": "2.0", a string "method", an "id" that is a
    string or an integer (never null, a bool or a fraction), "params" an object. Else -32600; the
    error carries the id only when it could be read and is valid. Batches (arrays) are not part of
    this revision.
 2. A notification is never answered (HTTP answers 202 with no body). A JSON-RPC response sent by
    a client is a ClientResponse: ignored on stdio, refused with -32600 over HTTP.
 3. HTTP: MCP-Protocol-Version and Mcp-Method are present, and Mcp-Name for tools/call,
    prompts/get and resources/read; values are visible ASCII after trimming. Else -32020 (400).
 4. params._meta holds a string protocolVersion and an object clientCapabilities. Else -32602 (400).
 5. HTTP: the headers equal the body, after =?base64?...?= decoding of Mcp-Name and Mcp-Param-*.
    Else -32020 (400). This comes before the version check.
 6. The version is supported, for every method, server/discover included. Else -32022 (400) with
    data.supported and data.requested.
 7. The method exists and the server declared its capability. Else -32601 (404).
 8. The params fit the method: unknown tool or prompt, missing resource, bad cursor. Else -32602.
    A tool that needs a client capability the request did not declare: -32021 (400).
 9. Run it. A tool's own failure is a result with isError, not an error (WIRE.md §9.4).
Every result carries resultType; the list methods, server/discover and resources/read carry ttlMs
and cacheScope; every result's _meta names the server unless the server was told not to.
subscriptions/listen answers at once with a Listening reply the transport keeps open: it waits on
`reply.listening.ended` (or asks `reply.listening.on_end(callback)`) and then sends
`reply.listening.close()`, the graceful result.
"""

from __future__ import annotations

import re
from operator import itemgetter

from . import _json, _log
from ._completions import complete
from ._context import Cancelled, Context, Flight, InputRequired, Peer
from ._resources import ResourceNotFound
from ._server import Server
from ._state import arguments_digest
from ._subscriptions import LIST_CHANGED, Listener
from ._wire import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_VERSION,
    META_CAPABILITIES,
    META_PROGRESS_TOKEN,
    META_SERVER_INFO,
    META_SUBSCRIPTION,
    META_VERSION,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
)
from .errors import (
    RESOURCE_NOT_FOUND,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ProtocolError,
    ResourceMissing,
    UnsupportedVersion,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Optional, TypeVar, Union
    Handler = Callable[[Server, dict[str, Any], Context], Any]

    from ._legacy import LegacySession
    from ._tasks import TaskManager
    Message = Union["Request", "Notification", "Cancel", "ClientResponse", "Refusal"]
    _M = TypeVar("_M", bound="_Message")

__all__ = ["ANSWERED", "AUTHOR", "CANCELLED", "LISTEN", "LISTENING", "PROTOCOL_VERSION", "QUICK", "SUPPORTED_VERSIONS",
           "Cancel", "ClientResponse", "Listening", "Notification", "Refusal", "Reply", "Request", "dispatch",
           "encode", "handle", "parse"]

log = _log.get("mcpserver.protocol")

SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)

# What kind of work a request is, which decides where a transport runs it:
QUICK = "quick"  # answered from the registry at once: the transport's reader may answer it itself
AUTHOR = "author"  # runs the server author's code, so may take long: cancellable, streamed when progress is asked
LISTEN = "listen"  # subscriptions/listen: a stream that stays open
_WORK = {"tools/call": AUTHOR, "prompts/get": AUTHOR, "resources/read": AUTHOR, "subscriptions/listen": LISTEN}

# What a Reply says happened:
ANSWERED = "answered"  # `response` is the answer to send
CANCELLED = "cancelled"  # cancelled while it ran: nothing at all is sent for it
LISTENING = "listening"  # a listen stream is open: `listening` says when it ends and what then to send

# Methods whose params carry the value mirrored in Mcp-Name.
_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
             "tasks/update": "taskId", "tasks/cancel": "taskId"}
# Methods of earlier revisions or retired patterns (WIRE.md §2); a legacy client learns what we speak.
_RETIRED = {
    "initialize": "2026-07-28 has no initialize handshake: send server/discover, with _meta on every request",
    "ping": "2026-07-28 has no ping",
    "logging/setLevel": "logging/setLevel is not part of 2026-07-28; logs go to the server's stderr",
    "resources/subscribe": "2026-07-28 has no resources/subscribe: use subscriptions/listen",
    "resources/unsubscribe": "2026-07-28 has no resources/unsubscribe: use subscriptions/listen",
}
_BASE64_OPEN, _BASE64_CLOSE = "=?base64?", "?="
_VISIBLE = re.compile(r"[\t -~]*")  # what a header value may hold: visible ASCII, space and tab


class _Message(tuple):  # type: ignore[type-arg]
    """Messages are values: immutable, equal when of one kind with equal fields. A tuple underneath,
    because every message read is built on the hot path, and a tuple is the cheapest immutable value
    to build (under half the cost of setting slots past a refusing __setattr__). A kind's fields are its
    annotations, in order: each becomes a read-only property over its place in the tuple."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        cls._fields = tuple(name for name in cls.__annotations__ if not name.startswith("_"))
        for index, name in enumerate(cls._fields):
            setattr(cls, name, property(itemgetter(index)))

    def __new__(cls: type[_M], *fields: Any) -> _M:
        if len(fields) != len(cls._fields):
            raise TypeError(f"{cls.__name__} takes {len(cls._fields)} fields ({', '.join(cls._fields)})")
        return tuple.__new__(cls, fields)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
        return f"{type(self).__name__}({fields})"


class Request(_Message):
    """A request to answer: its id (a string or an integer), method, params (an object), the progress
    token it carries (params._meta's progressToken when a string or an integer, else None) and what kind
    of work it is (QUICK, AUTHOR or LISTEN)."""

    __slots__ = ()
    id: Any
    method: str
    params: dict[str, Any]
    progress_token: Any
    work: str

    def __new__(cls, request_id: Any, method: str, params: dict[str, Any]) -> Request:
        return _request(request_id, method, params)


_new_message = tuple.__new__


def _request(request_id: Any, method: str, params: dict[str, Any]) -> Request:
    """Request(...) without the class call: what parse builds for every request."""
    meta = params.get("_meta")
    token = meta.get(META_PROGRESS_TOKEN) if isinstance(meta, dict) else None
    if not isinstance(token, (str, int)) or isinstance(token, bool):
        token = None
    return _new_message(Request, (request_id, method, params, token, _WORK.get(method, QUICK)))


class Notification(_Message):
    """A notification other than a cancel, with its method and params as sent: never answered (its
    params are not checked). Notification(method, params)."""

    __slots__ = ()
    method: str
    params: Any


class Cancel(_Message):
    """notifications/cancelled naming a request id a transport can look up, and its reason as sent
    (WIRE.md §8). Cancel(request_id, reason)."""

    __slots__ = ()
    request_id: Any
    reason: Any


class ClientResponse(_Message):
    """A JSON-RPC response from the client: the answer to a request the server sent, if it sent one;
    its result or its error, the other None. ClientResponse(id, result, error)."""

    __slots__ = ()
    id: Any
    result: Any
    error: Any


class Refusal(_Message):
    """A message refused before dispatch (unreadable, malformed, too long): send `reply` as it is."""

    __slots__ = ()
    reply: Reply

    def __new__(cls, error: ProtocolError, request_id: Any = None) -> Refusal:
        return tuple.__new__(cls, (Reply(_error_response(request_id, error), ANSWERED, error.http_status),))


class Reply:
    """What happened to a request: `outcome` (ANSWERED, CANCELLED or LISTENING), the `response` to
    send when answered, and the HTTP status the binding gives it (WIRE.md §16.9)."""

    __slots__ = ("http_status", "listening", "outcome", "response", "session")

    def __init__(self, response: Optional[dict[str, Any]], outcome: str = ANSWERED, http_status: int = 200,
                 listening: Optional[Listening] = None, session: Optional[LegacySession] = None):
        self.response = response
        self.outcome = outcome
        self.http_status = http_status
        self.listening = listening
        self.session = session  # the legacy session an initialize opened: the transport keeps it

    def __repr__(self) -> str:
        return f"Reply({self.response!r}, {self.outcome}, {self.http_status})"


class Listening:
    """An open subscriptions/listen stream: the transport waits on `ended` (cancelled, or the server is
    shutting down), then sends what `close()` returns: the graceful result, or nothing once cancelled."""

    __slots__ = ("_context", "_listener", "_server")

    def __init__(self, server: Server, listener: Listener, context: Context):
        self._server = server
        self._listener = listener
        self._context = context

    @property
    def ended(self) -> Any:
        """A threading.Event, set when the stream is to end."""
        return self._listener.ended

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the stream is to end: a transport driving its streams from an event loop
        waits with no thread; the callback may run on any thread (the one that cancelled, or shutdown's)."""
        self._listener.on_end(callback)

    def close(self) -> Reply:
        self._server.subscriptions.close(self._listener)
        if self._context.cancelled:
            return Reply(None, CANCELLED)
        result = {"_meta": {META_SUBSCRIPTION: self._context.request_id}}
        return Reply(_success(self._context.request_id, result, self._server))


def parse(data: bytes, max_bytes: Optional[int] = None, *, responses: bool = True) -> Message:
    """One message from its bytes, as a typed value; never raises. Bad UTF-8, bad JSON, nesting too
    deep (-32700) and a broken envelope (-32600) come back as a Refusal, as does a message longer
    than `max_bytes` (a stdio line that was cut: its rest was skipped) and, when the transport has
    no request of its own the client could be answering (`responses` False), a JSON-RPC response."""
    if max_bytes is not None and len(data) > max_bytes:
        return Refusal(InvalidRequest(f"Invalid Request: message longer than {max_bytes} bytes"))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}"))
    try:
        decoded = _json.loads(text)
    except _json.JSONTooDeep as exc:
        return Refusal(ParseError(f"Parse error: {exc}"))
    except ValueError as exc:
        return Refusal(ParseError(f"Parse error: Invalid JSON ({exc})"))
    return classify(decoded, responses=responses)


def classify(message: Any, *, responses: bool = True) -> Message:
    """What a decoded JSON value is, by the envelope rules (steps 1 and 2)."""
    if not isinstance(message, dict):
        if isinstance(message, list):
            return Refusal(InvalidRequest("Invalid Request: batches are not part of protocol 2026-07-28; "
                                          "send one message"))
        return Refusal(InvalidRequest("Invalid Request: a message must be a JSON object"))
    request_id = message.get("id")  # _readable_id, spelled out: this runs for every message
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    if message.get("jsonrpc") != "2.0":
        return Refusal(InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"'), request_id)
    method = message.get("method")
    if method is None and "method" not in message:
        if ("result" in message or "error" in message) and "id" in message:
            if not responses:
                return Refusal(InvalidRequest("Invalid Request: servers do not accept JSON-RPC responses"), request_id)
            return ClientResponse(message["id"], message.get("result"), message.get("error"))
        return Refusal(InvalidRequest('Invalid Request: "method" is missing'), request_id)
    if not isinstance(method, str):
        return Refusal(InvalidRequest('Invalid Request: "method" must be a string'), request_id)
    params = message.get("params", {})
    if "id" not in message:
        if method == "notifications/cancelled" and isinstance(params, dict):
            cancelled = _readable_id(params.get("requestId"))
            if cancelled is not None:  # a malformed cancel is ignored (WIRE.md §8)
                return Cancel(cancelled, params.get("reason"))
        return Notification(method, params)
    if request_id is None:
        return Refusal(InvalidRequest('Invalid Request: "id" must be a string or an integer'))
    if not isinstance(params, dict):
        return Refusal(InvalidParams('Invalid params: "params" must be an object', http_status=400), request_id)
    return _request(request_id, method, params)


def encode(response: dict[str, Any]) -> bytes:
    """One response as a single line of UTF-8 JSON (no newline)."""
    try:
        return _json.dumps_bytes(response)
    except (TypeError, ValueError, RecursionError) as exc:
        log.error("response to id %r cannot be encoded: %s", response.get("id"), exc)
        return _json.dumps_bytes(_error_response(response.get("id"), InternalError("Internal error")))


def handle(message: Any, server: Server) -> Optional[dict[str, Any]]:
    """Answer one decoded message as stdio does: the response, or None when nothing is sent."""
    typed = classify(message)
    if isinstance(typed, Refusal):
        return typed.reply.response
    if isinstance(typed, Request):
        return dispatch(typed, server).response
    return None


def dispatch(request: Request, server: Server, headers: Optional[dict[str, str]] = None, *,
             flight: Optional[Flight] = None, peer: Optional[Peer] = None) -> Reply:
    """Answer one request; see the module docstring for the order of the rules.

    `flight` is the transport's handle on the request: where its notifications (progress) go and its
    cancel flag. A request cancelled while it ran gets no response at all (outcome CANCELLED). `peer`
    is the client of the legacy session the request came in (None: none was opened); a request with
    the modern `_meta` is served as 2026-07-28 in any case.
    """
    # Over HTTP only a legacy session's requests are legacy; a request with the modern _meta never is.
    request_id, method, params, _, _ = request  # one unpacking: cheaper than three field reads
    legacy_opening = headers is None and (method == "ping" or (method == "initialize"
                                                              and _legacy().opens_legacy(method, params)))
    if (peer is not None or legacy_opening) and not _is_modern(params):
        return _dispatch_legacy(request, server, flight, peer)
    try:
        if headers is not None:
            _headers_present(headers, method)
        meta = _meta(method, params)
        if headers is not None:
            _headers_match(headers, method, params, meta, server)
        _version_supported(meta[META_VERSION])
        run = _method(method, server)
        context = Context(request_id, meta, flight, method)
        result = run(server, params, context)
        if isinstance(result, Listening):
            return Reply(None, LISTENING, 200, result)
        return Reply(_success(request_id, result, server))
    except ProtocolError as exc:
        return Reply(_error_response(request_id, exc), ANSWERED, exc.http_status)
    except Cancelled:
        return Reply(None, CANCELLED)
    except Exception:
        log.exception("internal error answering %r (id %r)", method, request_id)
        error = InternalError("Internal error")
        return Reply(_error_response(request_id, error), ANSWERED, error.http_status)


def _is_modern(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


_LEGACY_MODULE: Any = None


def _legacy() -> Any:
    """mcpserver._legacy, imported when a legacy client first shows up: a 2026-07-28 client's server
    does not pay for it at start-up."""
    global _LEGACY_MODULE
    if _LEGACY_MODULE is None:
        from . import _legacy as module
        _LEGACY_MODULE = module
    return _LEGACY_MODULE


def _dispatch_legacy(request: Request, server: Server, flight: Optional[Flight], peer: Optional[Peer]) -> Reply:
    """A request of an initialize-based revision (LEGACY.md): no _meta rules, legacy methods, legacy
    error codes, and every result shaped for the session's revision."""
    request_id, method, params = request.id, request.method, request.params
    try:
        if method == "initialize":
            if peer is not None:
                raise InvalidRequest("Invalid Request: this session is already initialized")
            result, session = _legacy().initialize(params, server.info, server.capabilities(), server.instructions)
            return Reply({"jsonrpc": "2.0", "id": request_id, "result": result}, session=session)
        if method == "ping":
            return Reply({"jsonrpc": "2.0", "id": request_id, "result": {}})
        if peer is None:
            raise InvalidRequest("Invalid Request: the session is not initialized: send initialize first")
        run = _legacy_method(method, server)
        meta = params.get("_meta")
        context = Context(request_id, meta if isinstance(meta, dict) else {}, flight, method, peer=peer)
        result = run(server, params, context)
        return Reply({"jsonrpc": "2.0", "id": request_id, "result": _legacy().shape(method, result, peer.session)})
    except MissingClientCapability as exc:
        if method != "tools/call":
            return _legacy_error(request_id, InvalidRequest(f"Invalid Request: {exc.message}", data=exc.data))
        return Reply({"jsonrpc": "2.0", "id": request_id,
                      "result": {"content": [{"type": "text", "text": exc.message}], "isError": True}})
    except ProtocolError as exc:
        return _legacy_error(request_id, exc)
    except Cancelled:
        return Reply(None, CANCELLED)
    except Exception:
        log.exception("internal error answering %r (id %r)", method, request_id)
        return _legacy_error(request_id, InternalError("Internal error"))


def _legacy_error(request_id: Any, error: ProtocolError) -> Reply:
    """Legacy error responses: no modern codes (-32020..-32022 do not exist there), a missing resource is
    -32002, and the HTTP status is the binding's default, 200 (LEGACY.md §10)."""
    response = _error_response(request_id, error)
    if isinstance(error, ResourceMissing):
        response["error"]["code"] = RESOURCE_NOT_FOUND
    return Reply(response, ANSWERED, 200)


def _legacy_method(method: str, server: Server) -> Handler:
    entry = _LEGACY_METHODS.get(method) or (_METHODS.get(method) if method not in _MODERN_ONLY else None)
    if entry is None:
        raise MethodNotFound(f"Method not found: {method}")
    capability, run = entry
    if capability is not None and not server.offers_capability(capability):
        raise MethodNotFound(f"Method not found: {method} (the server has no {capability})")
    return run


def _set_level(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    level = params.get("level")
    levels = _legacy().LOG_LEVELS
    if level not in levels:
        raise InvalidParams(f"Invalid params: level must be one of {', '.join(levels)}")
    assert context.peer is not None
    context.peer.set_log_level(str(level))
    return {}


def _subscribe(server: Server, params: dict[str, Any], context: Context, subscribed: bool = True) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams('Invalid params: "uri" must be a string')
    if subscribed and not server.serves(uri):
        raise ResourceMissing("Resource not found", data={"uri": uri})
    assert context.peer is not None
    context.peer.subscribe(uri, subscribed)
    return {}


def _unsubscribe(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _subscribe(server, params, context, subscribed=False)


def _readable_id(request_id: Any) -> Any:
    """The id when it is one a transport may use as a key (a string or an integer), else None."""
    if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
        return request_id
    return None


def _header(headers: dict[str, str], name: str) -> Optional[str]:
    value = headers.get(name.lower())
    if value is None:
        return None
    value = value.strip(" \t")
    if not _VISIBLE.fullmatch(value):
        raise HeaderMismatch(f"Header mismatch: {name} contains characters that are not allowed")
    return value


def _headers_present(headers: dict[str, str], method: str) -> None:
    names = [HEADER_VERSION, HEADER_METHOD] + ([HEADER_NAME] if method in _NAMED_BY else [])
    for name in names:
        if _header(headers, name) is None:
            # A client of an earlier revision sends initialize without these: tell it what we speak (WIRE.md §4).
            legacy = {"supported": list(SUPPORTED_VERSIONS)} if method == "initialize" else None
            raise HeaderMismatch(f"Header mismatch: required header {name} is missing", data=legacy)


def _decoded(value: str, name: str) -> str:
    if value.startswith(_BASE64_OPEN) and value.endswith(_BASE64_CLOSE) and len(value) >= 11:
        try:
            import base64

            return base64.b64decode(value[len(_BASE64_OPEN):-len(_BASE64_CLOSE)], validate=True).decode("utf-8")
        except ValueError:  # binascii.Error is one
            raise HeaderMismatch(f"Header mismatch: {name} is not valid =?base64?...?= UTF-8") from None
    return value


def _mismatch(name: str, header_value: str, body_value: Any) -> HeaderMismatch:
    return HeaderMismatch(f"Header mismatch: {name} header value {header_value!r} does not match body value "
                          f"{body_value!r}")


def _meta(method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = params.get("_meta")
    problem = None
    if not isinstance(meta, dict):
        problem = "params._meta is missing" if meta is None else "params._meta must be an object"
    elif not isinstance(meta.get(META_VERSION), str):
        problem = f"params._meta[{META_VERSION!r}] must be a string" if META_VERSION in meta \
            else f"params._meta[{META_VERSION!r}] is missing"
    elif not isinstance(meta.get(META_CAPABILITIES), dict):
        problem = f"params._meta[{META_CAPABILITIES!r}] must be an object" if META_CAPABILITIES in meta \
            else f"params._meta[{META_CAPABILITIES!r}] is missing"
    if problem is None:
        assert isinstance(meta, dict)
        return meta
    if method == "initialize":  # a client of an earlier revision: tell it what we speak
        raise InvalidParams(f"This server supports only protocol version {PROTOCOL_VERSION}; "
                            "initialize is not part of it", data={"supported": list(SUPPORTED_VERSIONS)},
                            http_status=400)
    raise InvalidParams(f"Invalid params: {problem}", http_status=400)


def _headers_match(headers: dict[str, str], method: str, params: dict[str, Any], meta: dict[str, Any],
                   server: Server) -> None:
    version = _header(headers, HEADER_VERSION)
    if version != meta[META_VERSION]:
        raise _mismatch(HEADER_VERSION, str(version), meta[META_VERSION])
    header_method = _header(headers, HEADER_METHOD)
    if header_method != method:
        raise _mismatch(HEADER_METHOD, str(header_method), method)
    field = _NAMED_BY.get(method)
    if field is not None and isinstance(params.get(field), str):
        name = _decoded(str(_header(headers, HEADER_NAME)), HEADER_NAME)
        if name != params[field]:
            raise _mismatch(HEADER_NAME, name, params[field])
    if method == "tools/call":
        tool_name = params.get("name")
        tool = server.tools.get(tool_name) if isinstance(tool_name, str) else None
        arguments = params.get("arguments")
        if tool is not None and tool.header_params and isinstance(arguments, dict):
            _param_headers_match(headers, tool.header_params, arguments)


def _param_headers_match(headers: dict[str, str], header_params: Any, arguments: dict[str, Any]) -> None:
    for param in header_params:
        value: Any = arguments
        for key in param.path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue
        name = HEADER_PARAM_PREFIX + param.name
        raw = _header(headers, name)
        if raw is None:
            raise HeaderMismatch(f"Header mismatch: required header {name} is missing")
        text = _decoded(raw, name)
        if isinstance(value, bool):
            same = text == ("true" if value else "false")
        elif isinstance(value, (int, float)):
            try:
                same = float(text) == value
            except ValueError:
                same = False
        else:
            same = text == value
        if not same:
            raise _mismatch(name, text, value)


def _version_supported(version: str) -> None:
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedVersion("Unsupported protocol version",
                                 data={"supported": list(SUPPORTED_VERSIONS), "requested": version})


def _method(method: str, server: Server) -> Handler:
    entry = _METHODS.get(method)
    if entry is None:
        if method in _RETIRED:
            raise MethodNotFound(f"Method not found: {method}",
                                 data={"reason": _RETIRED[method], "supported": list(SUPPORTED_VERSIONS)})
        raise MethodNotFound(f"Method not found: {method}")
    capability, run = entry
    if capability is not None and not server.offers_capability(capability):
        raise MethodNotFound(f"{capability.capitalize()} not supported",
                             data={"reason": f"Server does not support the {capability} capability"})
    return run


# ---------------------------------------------------------------------------------------------
# Step 8 and 9: the methods


def _success(request_id: Any, result: dict[str, Any], server: Server) -> dict[str, Any]:
    result.setdefault("resultType", "complete")  # an input_required round has set its own
    if server.server_info_in_results:
        result["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: server.info}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error_response(request_id: Any, error: ProtocolError) -> dict[str, Any]:
    response: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:
        response["id"] = request_id
    response["error"] = error.to_error()
    return response


def _cacheable(server: Server, result: dict[str, Any]) -> dict[str, Any]:
    result["ttlMs"] = server.ttl_ms
    result["cacheScope"] = server.cache_scope
    return result


def _discover(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    result: dict[str, Any] = {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": server.capabilities()}
    if server.instructions:
        result["instructions"] = server.instructions
    return _cacheable(server, result)


def _page(server: Server, params: dict[str, Any], key: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """One page of a list; the cursor is opaque to clients and checked here."""
    start = 0
    cursor = params.get("cursor")
    if cursor is not None:
        if not isinstance(cursor, str):
            raise InvalidParams("Invalid params: cursor must be a string")
        start = _cursor_offset(cursor, key, len(items))
    end = start + server.page_size
    result: dict[str, Any] = {key: items[start:end]}
    if end < len(items):
        import base64

        result["nextCursor"] = base64.urlsafe_b64encode(f"{key}:{end}".encode()).decode("ascii")
    return _cacheable(server, result)


def _cursor_offset(cursor: str, key: str, count: int) -> int:
    try:
        import base64

        kind, _, offset = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii").partition(":")
        start = int(offset)
    except ValueError:  # UnicodeError and binascii.Error are ValueErrors
        start, kind = -1, ""
    if kind != key or not 0 < start < count:
        raise InvalidParams("Invalid cursor")
    return start


def _named(method: str, params: dict[str, Any]) -> str:
    """The name (or uri) a method acts on: the value Mcp-Name mirrors; it must be a string."""
    field = _NAMED_BY[method]
    value = params.get(field)
    if not isinstance(value, str):
        raise InvalidParams(f"Invalid params: {method} needs \"{field}\", a string")
    return value


def _list_tools(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _page(server, params, "tools", [tool.definition for tool in server.tools.values()])


def _resumable(server: Server, params: dict[str, Any], context: Context, target: str, arguments: Any,
               run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run the author's code for a method that may ask the client for input (MRTR, WIRE.md §14.2).

    The answers come from the sealed requestState of earlier rounds (checked before anything runs:
    a tampered, foreign or expired state is -32602) and from this round's inputResponses, of which
    only the keys asked for last round count. If the code asks for what is not answered yet, the
    result is input_required, with the questions and a newly sealed state.
    """
    def binding() -> tuple[str, str, str, str]:  # hashed only when a state is opened or sealed
        principal = context.principal
        who = "" if principal is None else _json.dumps([principal.subject, principal.client_id])
        return context.method, target, arguments_digest(arguments), who

    state, responses = params.get("requestState"), params.get("inputResponses")
    pending: Optional[list[str]] = None
    if state is not None:
        context.answers, pending = server.sealer.open(state, binding())
    if responses is not None:
        if not isinstance(responses, dict):
            raise InvalidParams("Invalid params: inputResponses must be an object of answers")
        context.answers.update((key, answer) for key, answer in responses.items()
                               if pending is None or key in pending)
    try:
        return run()
    except InputRequired as needed:
        return {"resultType": "input_required", "inputRequests": needed.requests,
                "requestState": server.sealer.seal(binding(), context.answers, list(needed.requests))}


def _call_tool(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    name = _named("tools/call", params)
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParams("Invalid params: \"arguments\" must be an object")
    tool = server.tools.get(name)
    if tool is None:
        raise InvalidParams(f"Unknown tool: {name}")
    if tool.requires_client_capabilities:
        declared = context.client_capabilities
        missing = {k: v for k, v in tool.requires_client_capabilities.items() if k not in declared}
        if missing:
            raise MissingClientCapability(f"Missing required client capability: {', '.join(missing)}",
                                          data={"requiredCapabilities": missing})
    if tool.task != "never" and _task_mode(tool.task, context):
        tasks = task_manager(server)
        return _resumable(server, params, context, name, arguments,
                          lambda: tasks.call(context, lambda: tool.call(arguments, context if tool.takes_context
                                                                        else None)))
    if context.peer is not None:  # a legacy session: the tool's log records reach the client
        with context.logs_to_client():
            return tool.call(arguments, context if tool.takes_context else None)
    if not tool.takes_context:
        return tool.call(arguments)
    return _resumable(server, params, context, name, arguments, lambda: tool.call(arguments, context))


# -- the Tasks extension (TASKS.md) ----------------------------------------------------------------


def _task_mode(mode: str, context: Context) -> bool:
    """Whether a task tool's call runs as a task: whenever the request declared the extension; a
    "required" one refuses a request that did not (-32021, TASKS.md §2); a legacy session has none."""
    if context.peer is None and declares_tasks(context.client_capabilities):
        return True
    if mode == "required":
        raise MissingClientCapability(f"Missing required client capability: the {TASKS_EXTENSION} extension "
                                      "(this tool runs only as a task)", data=_NEEDS_TASKS)
    return False


_NEEDS_TASKS: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def declares_tasks(capabilities: dict[str, Any]) -> bool:
    """Whether a request's client capabilities declare the extension (the 2025-11-25 `tasks` slot does not)."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def task_manager(server: Server) -> TaskManager:
    """The server's task manager, made (and its store opened) on first use: a server without task tools
    never loads the store. ConfigError if the store cannot serve."""
    def make() -> TaskManager:
        from ._tasks import TaskManager as Manager  # imported here: only a server with task tools pays for it

        return Manager(server)

    return server.component("tasks", make)  # type: ignore[no-any-return]


def _listened_tasks(server: Server, task_ids: Any, context: Context) -> list[str]:
    """The task ids a listen stream may follow: the caller's own (others are left out of the
    acknowledgement, so existence does not leak, TASKS.md §11); -32021 without the extension."""
    if task_ids is None:
        return []
    if not declares_tasks(context.client_capabilities):
        raise MissingClientCapability(f"Missing required client capability: the {TASKS_EXTENSION} extension",
                                      data=_NEEDS_TASKS)
    if not (isinstance(task_ids, list) and all(isinstance(t, str) for t in task_ids)):
        raise InvalidParams("Invalid params: notifications.taskIds must be an array of task ids")
    return task_manager(server).owned(task_ids, context)


def _task_id(params: dict[str, Any], context: Context) -> str:
    if not declares_tasks(context.client_capabilities):
        raise MissingClientCapability(f"Missing required client capability: the {TASKS_EXTENSION} extension",
                                      data=_NEEDS_TASKS)
    task_id = params.get("taskId")
    if not isinstance(task_id, str):
        raise InvalidParams('Invalid params: "taskId" must be a string')
    return task_id


def _get_task(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return task_manager(server).get(_task_id(params, context), context)


def _update_task(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    task_id = _task_id(params, context)
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams('Invalid params: "inputResponses" must be an object of answers')
    return task_manager(server).update(task_id, responses, context)


def _cancel_task(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return task_manager(server).cancel(_task_id(params, context), context)


def _list_resources(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _page(server, params, "resources", [r.definition for r in server.resources.values()])


def _list_templates(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _page(server, params, "resourceTemplates", [t.definition for t in server.resource_templates])


def _read_resource(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    uri = _named("resources/read", params)

    def read() -> dict[str, Any]:
        try:
            return _cacheable(server, {"contents": server.read_resource(uri, context)})
        except ResourceNotFound:
            raise ResourceMissing("Resource not found", data={"uri": uri}) from None

    return _resumable(server, params, context, uri, None, read)


def _list_prompts(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _page(server, params, "prompts", [p.definition for p in server.prompts.values()])


def _get_prompt(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    name = _named("prompts/get", params)
    prompt = server.prompts.get(name)
    if prompt is None:
        raise InvalidParams(f"Unknown prompt: {name}")
    arguments = params.get("arguments")
    if prompt.context_parameter is None:
        return prompt.get(arguments)
    return _resumable(server, params, context, name, arguments, lambda: prompt.get(arguments, context))


def _complete(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    ref = params.get("ref")
    if not isinstance(ref, dict) or ref.get("type") not in ("ref/prompt", "ref/resource"):
        raise InvalidParams('Invalid params: "ref" must be {"type": "ref/prompt", "name": ...} or '
                            '{"type": "ref/resource", "uri": ...}')
    if ref["type"] == "ref/prompt":
        name = ref.get("name")
        prompt = server.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
        return complete(prompt.completions, params)
    template = next((t for t in server.resource_templates if t.uri_template == ref.get("uri")), None)
    if template is None:
        raise InvalidParams(f"Unknown resource template: {ref.get('uri')}")
    return complete(template.completions, params)


def _listen(server: Server, params: dict[str, Any], context: Context) -> Listening:
    """subscriptions/listen: open the listener and acknowledge; the stream then stays open until
    cancelled (nothing more is sent) or the server shuts down (the graceful result is the answer).
    Notifications go out through the flight."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams('Invalid params: "notifications" must be an object (a SubscriptionFilter)')
    if not context.flight.streams:  # no one would hear the stream: a caller of dispatch() without a transport
        raise InvalidRequest("Invalid Request: subscriptions/listen needs a transport that streams notifications "
                             "(stdio or Streamable HTTP)")
    capabilities = server.capabilities()
    honoured: dict[str, Any] = {key: True for key, (kind, _) in LIST_CHANGED.items()
                                if wanted.get(key) is True and kind in capabilities}
    uris = wanted.get("resourceSubscriptions")
    if uris is not None and not (isinstance(uris, list) and all(isinstance(u, str) for u in uris)):
        raise InvalidParams("Invalid params: notifications.resourceSubscriptions must be an array of URIs")
    served = [uri for uri in uris or () if server.serves(uri)]
    if served:
        honoured["resourceSubscriptions"] = served
    tasks = _listened_tasks(server, wanted.get("taskIds"), context)
    if tasks:
        honoured["taskIds"] = tasks
    listener = Listener(context.request_id, {LIST_CHANGED[key][0] for key in honoured if key in LIST_CHANGED},
                        set(served), context.flight, frozenset(tasks))
    server.subscriptions.open(listener)
    context.on_cancel(listener.ended.set)
    listener.send("notifications/subscriptions/acknowledged", {"notifications": honoured})
    return Listening(server, listener, context)


_METHODS: dict[str, tuple[Optional[str], Handler]] = {
    "server/discover": (None, _discover),
    "tools/list": ("tools", _list_tools),
    "tools/call": ("tools", _call_tool),
    "resources/list": ("resources", _list_resources),
    "resources/templates/list": ("resources", _list_templates),
    "resources/read": ("resources", _read_resource),
    "prompts/list": ("prompts", _list_prompts),
    "prompts/get": ("prompts", _get_prompt),
    "completion/complete": ("completions", _complete),
    "subscriptions/listen": (None, _listen),
    "tasks/get": (None, _get_task),
    "tasks/update": (None, _update_task),
    "tasks/cancel": (None, _cancel_task),
}
# Methods legacy sessions have no such thing as (the Tasks extension does not apply to them, TASKS.md §1).
_MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen", "tasks/get", "tasks/update", "tasks/cancel"})
_LEGACY_METHODS: dict[str, tuple[Optional[str], Handler]] = {
    "logging/setLevel": (None, _set_level),
    "resources/subscribe": ("resources", _subscribe),
    "resources/unsubscribe": ("resources", _unsubscribe),
}
