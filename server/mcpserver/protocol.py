"""The protocol core, for both eras: bytes in, one typed message out; a request in, one reply out.

It serves the stateless revision 2026-07-28 (the rules below) and, for a client that opened with initialize,
the legacy revisions: dispatch hands their requests to mcpserver.legacy, its one seam into that wing, imported
only when a legacy client first shows up. What each method does is mcpserver._methods'.

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

from operator import itemgetter

from . import _json, _log
from ._context import Call, Cancelled, Context, Flight, Peer
from ._methods import (
    ANSWERED,
    CANCELLED,
    INDIRECT,
    LISTENING,
    METHODS,
    NAMED_BY,
    Listening,
    Reply,
    call_tool_directly,
    error_response,
    success,
)
from ._middleware import transport_of
from ._server import Server
from ._wire import (
    HEADER_METHOD,
    HEADER_NAME,
    HEADER_PARAM_PREFIX,
    HEADER_VERSION,
    META_CAPABILITIES,
    META_PROGRESS_TOKEN,
    META_VERSION,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
)
from .errors import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ParseError,
    ProtocolError,
    UnsupportedVersion,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional, TypeVar, Union
    Handler = Callable[[Server, dict[str, Any], Context], Any]
    Message = Union["Request", "Notification", "Cancel", "ClientResponse", "Refusal"]
    _M = TypeVar("_M", bound="_Message")

__all__ = ["ANSWERED", "AUTHOR", "CANCELLED", "LISTEN", "LISTENING", "PROTOCOL_VERSION", "QUICK", "SUPPORTED_VERSIONS",
           "Cancel", "ClientResponse", "Listening", "Notification", "Refusal", "Reply", "Request", "classify",
           "dispatch", "encode", "parse"]

log = _log.get("mcpserver.protocol")


# What kind of work a request is, which decides where a transport runs it:
QUICK = "quick"  # answered from the registry at once: the transport's reader may answer it itself
AUTHOR = "author"  # runs the server author's code, so may take long: cancellable, streamed when progress is asked
LISTEN = "listen"  # subscriptions/listen: a stream that stays open
_WORK = {"tools/call": AUTHOR, "prompts/get": AUTHOR, "resources/read": AUTHOR, "subscriptions/listen": LISTEN}


# Methods of earlier revisions or retired patterns (WIRE.md §2); a legacy client learns what we speak.
_RETIRED = {
    "initialize": "2026-07-28 has no initialize handshake: send server/discover, with _meta on every request",
    "ping": "2026-07-28 has no ping",
    "logging/setLevel": "logging/setLevel is not part of 2026-07-28; logs go to the server's stderr",
    "resources/subscribe": "2026-07-28 has no resources/subscribe: use subscriptions/listen",
    "resources/unsubscribe": "2026-07-28 has no resources/unsubscribe: use subscriptions/listen",
}
_BASE64_OPEN, _BASE64_CLOSE = "=?base64?", "?="


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
        return tuple.__new__(cls, (Reply(error_response(request_id, error), ANSWERED, error.http_status),))


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
        return _json.dumps_bytes(error_response(response.get("id"), InternalError("Internal error")))


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
        return _legacy().dispatch(request, server, flight, peer)  # type: ignore[no-any-return]
    try:
        if headers is not None:
            present = _headers_present(headers, method)
        meta = _meta(method, params)
        if headers is not None:
            _headers_match(present, headers, method, params, meta, server)
        _version_supported(meta[META_VERSION])
        through = server.middleware.run  # None without middleware: then nothing more is done per request
        result = INDIRECT
        if through is None and method == "tools/call":
            result = call_tool_directly(server, params, request_id, meta, flight)
        if result is INDIRECT:
            run = _method(method, server)
            context = Context(request_id, meta, flight, method)
            if through is None:
                result = run(server, params, context)
            else:
                call = Call(request_id, method, params, context.principal, transport_of(headers, flight, None),
                            meta[META_VERSION], headers)
                result = through(call, run, server, params, context)
        if isinstance(result, Listening):
            return Reply(None, LISTENING, 200, result)
        return Reply(success(request_id, result, server))
    except ProtocolError as exc:
        return Reply(error_response(request_id, exc), ANSWERED, exc.http_status)
    except Cancelled:
        return Reply(None, CANCELLED)
    except Exception:
        log.exception("internal error answering %r (id %r)", method, request_id)
        error = InternalError("Internal error")
        return Reply(error_response(request_id, error), ANSWERED, error.http_status)


def _is_modern(params: dict[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_VERSION in meta


_LEGACY_MODULE: Any = None


def _legacy() -> Any:
    """mcpserver.legacy, imported when a legacy client first shows up: a 2026-07-28 client's server does
    not pay for it at start-up."""
    global _LEGACY_MODULE
    if _LEGACY_MODULE is None:
        from . import legacy as module
        _LEGACY_MODULE = module
    return _LEGACY_MODULE


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
    # Visible ASCII, space and tab only: str methods, where a regex match cost a third of the lookup.
    if not (value.isascii() and (value.isprintable() or value.replace("\t", " ").isprintable())):
        raise HeaderMismatch(f"Header mismatch: {name} contains characters that are not allowed")
    return value


def _headers_present(headers: dict[str, str], method: str) -> list[str]:
    """The values of the headers the method needs (version, method, and name where NAMED_BY has it), read once
    for _headers_match; HeaderMismatch for the first missing."""
    values = []
    for name in _NEEDED_HEADERS if method in NAMED_BY else _NEEDED_HEADERS[:2]:
        value = _header(headers, name)
        if value is None:
            # A client of an earlier revision sends initialize without these: tell it what we speak (WIRE.md §4).
            legacy = {"supported": list(SUPPORTED_VERSIONS)} if method == "initialize" else None
            raise HeaderMismatch(f"Header mismatch: required header {name} is missing", data=legacy)
        values.append(value)
    return values


_NEEDED_HEADERS = (HEADER_VERSION, HEADER_METHOD, HEADER_NAME)


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


def _headers_match(present: list[str], headers: dict[str, str], method: str, params: dict[str, Any],
                   meta: dict[str, Any], server: Server) -> None:
    version = present[0]
    if version != meta[META_VERSION]:
        raise _mismatch(HEADER_VERSION, version, meta[META_VERSION])
    header_method = present[1]
    if header_method != method:
        raise _mismatch(HEADER_METHOD, header_method, method)
    field = NAMED_BY.get(method)
    if field is not None and isinstance(params.get(field), str):
        name = _decoded(present[2], HEADER_NAME)
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
    entry = METHODS.get(method)
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
