"""The protocol core: one message in, one reply out, for the stateless MCP revision 2026-07-28.

It never reads or writes a stream, sleeps or keeps state between calls: both transports call it,
so stdio and HTTP cannot drift. Each request stands alone (WIRE.md §2).

Rules, in the order they are applied (WIRE.md §17). `headers` is None on stdio, where the header
steps do not exist; over HTTP it maps lower-case header names to values.
 1. Envelope: one JSON object, "jsonrpc": "2.0", a string "method", an "id" that is a string or an
    integer (never null, a bool or a fraction), "params" an object. Else -32600; the error carries
    the id only when it could be read and is valid. Batches (arrays) are not part of this revision.
 2. A notification is never answered (HTTP answers 202 with no body). A JSON-RPC response sent by
    a client is ignored on stdio and refused with -32600 over HTTP.
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
"""

from __future__ import annotations

import re

from . import _json, _log
from ._completions import complete
from ._context import Cancelled, Context, Flight, InputRequired
from ._resources import ResourceNotFound
from ._server import Server
from ._state import arguments_digest
from ._subscriptions import LIST_CHANGED, META_SUBSCRIPTION, Listener
from .errors import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ProtocolError,
    UnsupportedVersion,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: it costs a stdio server's start-up
    from typing import Any, Callable, Optional
    Handler = Callable[[Server, dict[str, Any], Context], dict[str, Any]]

__all__ = ["CANCELLED", "PROTOCOL_VERSION", "RUNS_AUTHOR_CODE", "SUPPORTED_VERSIONS", "Reply", "cancelled_request",
           "dispatch", "dispatch_bytes", "encode", "error_reply", "handle", "parse", "progress_token"]

log = _log.get("mcpserver.protocol")

PROTOCOL_VERSION = "2026-07-28"
CANCELLED = 499  # Reply.status of a request cancelled while it ran: nothing is sent for it
# Methods that run the server author's code, so may take long: transports run them where a client can
# cancel them, and stream them when progress is asked for.
RUNS_AUTHOR_CODE = frozenset({"tools/call", "prompts/get", "resources/read"})
LISTEN = "subscriptions/listen"  # a request that stays open: transports give it a stream of its own
SUPPORTED_VERSIONS = (PROTOCOL_VERSION,)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

HEADER_VERSION = "MCP-Protocol-Version"
HEADER_METHOD = "Mcp-Method"
HEADER_NAME = "Mcp-Name"
HEADER_PARAM_PREFIX = "Mcp-Param-"

# Methods whose params carry the value mirrored in Mcp-Name.
_NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
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


class Reply:
    """What to send back: a response object (None for a notification) and the HTTP status for it."""

    __slots__ = ("response", "status")

    def __init__(self, response: Optional[dict[str, Any]], status: int):
        self.response = response
        self.status = status

    def __repr__(self) -> str:
        return f"Reply({self.response!r}, {self.status})"


def parse(data: bytes) -> Any:
    """Decode one message. Raises ParseError (-32700) for bad UTF-8, bad JSON, or nesting too deep."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}") from None
    try:
        return _json.loads(text)
    except _json.JSONTooDeep as exc:
        raise ParseError(f"Parse error: {exc}") from None
    except ValueError as exc:
        raise ParseError(f"Parse error: Invalid JSON ({exc})") from None


def encode(response: dict[str, Any]) -> bytes:
    """One response as a single line of UTF-8 JSON (no newline)."""
    try:
        return _json.dumps_bytes(response)
    except (TypeError, ValueError, RecursionError) as exc:
        log.error("response to id %r cannot be encoded: %s", response.get("id"), exc)
        return _json.dumps_bytes(_error_response(response.get("id"), InternalError("Internal error")))


def handle(message: Any, server: Server) -> Optional[dict[str, Any]]:
    """Answer one decoded message as stdio does: the response, or None for a notification."""
    return dispatch(message, server).response


def dispatch_bytes(data: bytes, server: Server, headers: Optional[dict[str, str]] = None, *,
                   flight: Optional[Flight] = None) -> Reply:
    """Parse then dispatch: what a transport calls with the bytes of one message."""
    try:
        message = parse(data)
    except ParseError as exc:
        return error_reply(exc)
    return dispatch(message, server, headers, flight=flight)


def dispatch(message: Any, server: Server, headers: Optional[dict[str, str]] = None, *,
             flight: Optional[Flight] = None) -> Reply:
    """Answer one decoded message; see the module docstring for the order of the rules.

    `flight` is the transport's handle on the request: where its notifications (progress) go and its
    cancel flag. A request cancelled while it ran gets no response at all (Reply(None, CANCELLED)).
    """
    request_id = _readable_id(message)
    try:
        method, params = _envelope(message, http=headers is not None)
        if method is None or "id" not in message:  # a notification, or a response on stdio
            return Reply(None, 202)
        if not isinstance(params, dict):
            raise InvalidParams('Invalid params: "params" must be an object', http_status=400)
        if headers is not None:
            _headers_present(headers, method)
        meta = _meta(method, params)
        if headers is not None:
            _headers_match(headers, method, params, meta, server)
        _version_supported(meta[META_VERSION])
        run = _method(method, server)
        context = Context(request_id, meta, flight, method)
        return Reply(_success(request_id, run(server, params, context), server), 200)
    except ProtocolError as exc:
        return Reply(_error_response(request_id, exc), exc.http_status)
    except Cancelled:
        return Reply(None, CANCELLED)
    except Exception:
        log.exception("internal error answering %s", _describe(message))
        error = InternalError("Internal error")
        return Reply(_error_response(request_id, error), error.http_status)


def error_reply(error: ProtocolError, request_id: Any = None) -> Reply:
    """The reply for a message refused before it could be dispatched (unreadable, too long)."""
    return Reply(_error_response(request_id, error), error.http_status)


def cancelled_request(message: Any) -> Any:
    """The request id a well-formed notifications/cancelled names, else None (a bad one is ignored, WIRE.md §8)."""
    if (isinstance(message, dict) and message.get("method") == "notifications/cancelled" and "id" not in message
            and message.get("jsonrpc") == "2.0" and isinstance(message.get("params"), dict)):
        return _readable_id({"id": message["params"].get("requestId")})
    return None


def request_method(message: Any) -> Optional[str]:
    """The method of a request whose id a transport can track (a string or an integer), else None.
    Anything else (a notification, an id or a method of another type) goes to dispatch whole, which
    answers it by the rules: a transport never uses an unchecked id as a key or a method as a name."""
    if _readable_id(message) is None:
        return None
    method = message.get("method")
    return method if isinstance(method, str) else None


def progress_token(message: Any) -> Any:
    """The progress token a request carries (string or integer), else None."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _readable_id(message: Any) -> Any:
    if isinstance(message, dict):
        request_id = message.get("id")
        if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
            return request_id
    return None


def _envelope(message: Any, *, http: bool) -> tuple[Optional[str], Any]:
    """The method and params of a valid request or notification; method None for a client's response.

    params is checked by the caller: a malformed notification is never answered, so its params are
    never looked at."""
    if isinstance(message, list):
        raise InvalidRequest("Invalid Request: batches are not part of protocol 2026-07-28; send one message")
    if not isinstance(message, dict):
        raise InvalidRequest("Invalid Request: a message must be a JSON object")
    if message.get("jsonrpc") != "2.0":
        raise InvalidRequest('Invalid Request: "jsonrpc" must be "2.0"')
    if "method" not in message:
        if ("result" in message or "error" in message) and "id" in message:
            if http:
                raise InvalidRequest("Invalid Request: servers do not accept JSON-RPC responses")
            return None, {}
        raise InvalidRequest('Invalid Request: "method" is missing')
    method = message["method"]
    if not isinstance(method, str):
        raise InvalidRequest('Invalid Request: "method" must be a string')
    if "id" in message and _readable_id(message) is None:
        raise InvalidRequest('Invalid Request: "id" must be a string or an integer')
    return method, message.get("params", {})


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


def _describe(message: Any) -> str:
    if isinstance(message, dict):
        return f"{message.get('method')!r} (id {message.get('id')!r})"
    return type(message).__name__


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
        declared = params["_meta"][META_CAPABILITIES]
        missing = {k: v for k, v in tool.requires_client_capabilities.items() if k not in declared}
        if missing:
            raise MissingClientCapability(f"Missing required client capability: {', '.join(missing)}",
                                          data={"requiredCapabilities": missing})
    if not tool.takes_context:
        return tool.call(arguments)
    return _resumable(server, params, context, name, arguments, lambda: tool.call(arguments, context))


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
            raise InvalidParams("Resource not found", data={"uri": uri}) from None

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


def _listen(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    """subscriptions/listen: acknowledge, then stay open until cancelled (nothing more is sent) or the
    server shuts down (the graceful result is the answer). Notifications go out through the flight."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams('Invalid params: "notifications" must be an object (a SubscriptionFilter)')
    if not context.flight.streams:  # dispatch() called directly: the stream would stay open with no one to hear it
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
    listener = Listener(context.request_id, {LIST_CHANGED[key][0] for key in honoured if key in LIST_CHANGED},
                        set(served), context.flight)
    server.subscriptions.open(listener)
    try:
        context.on_cancel(listener.ended.set)
        listener.send("notifications/subscriptions/acknowledged", {"notifications": honoured})
        listener.ended.wait()
    finally:
        server.subscriptions.close(listener)
    context.check_cancelled()
    return {"_meta": {META_SUBSCRIPTION: context.request_id}}


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
}
