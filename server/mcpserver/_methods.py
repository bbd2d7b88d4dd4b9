"""What each method of 2026-07-28 does, once protocol.dispatch has checked the request's envelope, headers,
_meta and version (steps 8 and 9 of protocol's rules), and the Reply that dispatch gives a transport.

Rules of this module:
- A handler is `(server, params, context) -> result`: the result dict, which `success` completes with
  resultType and the server's _meta, or a Listening for subscriptions/listen. It raises a ProtocolError
  for the client's mistakes; anything else is the server's bug (-32603).
- The list methods, server/discover and resources/read are cacheable (ttlMs, cacheScope).
- The author's code that may ask the client for input runs through `_resumable` (MRTR: WIRE.md §14.2).
- The Tasks wing's methods (tasks/get, tasks/update, tasks/cancel) and how a task tool's call becomes a
  task live in mcpserver.tasks, the Skills wing's (skills/list, skills/get, resources/directory/read) in
  mcpserver.skills, each imported only when first used. The legacy era reuses these handlers for
  the methods the two eras share (mcpserver.legacy).
"""

from __future__ import annotations

from . import _json
from ._context import Context, Flight, InputRequired
from ._server import Server
from ._state import arguments_digest
from ._subscriptions import LIST_CHANGED, Listener
from ._wire import META_PROGRESS_TOKEN, META_SERVER_INFO, META_SUBSCRIPTION, SKILLS_EXTENSION, SUPPORTED_VERSIONS
from .errors import (
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    MissingClientCapability,
    ProtocolError,
    ResourceMissing,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional
    Handler = Callable[[Server, dict[str, Any], Context], Any]

    from ._context import Negotiated
    from ._tools import Tool

__all__ = ["ANSWERED", "CANCELLED", "INDIRECT", "LISTENING", "METHODS", "MODERN_ONLY", "NAMED_BY", "Listening",
           "Reply", "cacheable", "call_tool_directly", "error_response", "success"]

# What a Reply says happened:
ANSWERED = "answered"  # `response` is the answer to send

CANCELLED = "cancelled"  # cancelled while it ran: nothing at all is sent for it

LISTENING = "listening"  # a listen stream is open: `listening` says when it ends and what then to send

# Methods whose params carry the value mirrored in Mcp-Name.
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
             "tasks/update": "taskId", "tasks/cancel": "taskId"}

class Reply:
    """What happened to a request: `outcome` (ANSWERED, CANCELLED or LISTENING), the `response` to
    send when answered, and the HTTP status the binding gives it (WIRE.md §16.9)."""

    __slots__ = ("http_status", "listening", "outcome", "response", "session")

    def __init__(self, response: Optional[dict[str, Any]], outcome: str = ANSWERED, http_status: int = 200,
                 listening: Optional[Listening] = None, session: Optional[Negotiated] = None):
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
        return Reply(success(self._context.request_id, result, self._server))

def success(request_id: Any, result: dict[str, Any], server: Server) -> dict[str, Any]:
    if "resultType" not in result:  # an input_required round has set its own
        result["resultType"] = "complete"
    if server.server_info_in_results:
        meta = result.get("_meta")
        result["_meta"] = {META_SERVER_INFO: server.info} if meta is None else {**meta, META_SERVER_INFO: server.info}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}

def error_response(request_id: Any, error: ProtocolError) -> dict[str, Any]:
    response: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:
        response["id"] = request_id
    response["error"] = error.to_error()
    return response

def cacheable(server: Server, result: dict[str, Any]) -> dict[str, Any]:
    result["ttlMs"] = server.ttl_ms
    result["cacheScope"] = server.cache_scope
    return result

def _tasks() -> Any:
    """The Tasks wing, imported when a task tool or a tasks/* method is first used: a server without them never
    loads it."""
    from . import tasks

    return tasks


def _of_tasks(name: str) -> Handler:
    def run(server: Server, params: dict[str, Any], context: Context) -> Any:
        return getattr(_tasks(), name)(server, params, context)

    return run


def _of_skills(name: str) -> Handler:
    """A method of the Skills extension, in mcpserver.skills (imported then): -32601 from a server without skills."""
    def run(server: Server, params: dict[str, Any], context: Context) -> Any:
        catalog = server.component(SKILLS_EXTENSION, lambda: _serves_no_skills(context.method))
        from .skills import _methods as skills

        return getattr(skills, name)(catalog, server, params, context)

    return run


def _serves_no_skills(method: str) -> Any:
    raise MethodNotFound(f"Method not found: {method}", data={"reason": f"this server serves no skills (the "
                                                                          f"{SKILLS_EXTENSION} extension)"})


def _discover(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    result: dict[str, Any] = {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": server.capabilities()}
    if server.instructions:
        result["instructions"] = server.instructions
    return cacheable(server, result)

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
    return cacheable(server, result)

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
    field = NAMED_BY[method]
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

INDIRECT: Any = object()  # what call_tool_directly says of a call it leaves to the general path


def call_tool_directly(server: Server, params: dict[str, Any], request_id: Any, meta: dict[str, Any],
                       flight: Optional[Flight]) -> Any:
    """A 2026-07-28 tools/call on a server without middleware, of a tool that needs no client capability and
    has no task mode, and that no heartbeat beats: run with no handler lookup, and with a Context only if the
    tool asks for one. INDIRECT for any other call, which _call_tool then answers or refuses (a sentinel, not
    None: whatever a tool's call returns, it never runs twice). It saves a pipelined echo 8% of its instructions,
    and a tool that takes a Context 4% (counted)."""
    name = params.get("name")
    if not isinstance(name, str):
        return INDIRECT
    tool = server.tools.get(name)
    if tool is None or tool.requires_client_capabilities or tool.task != "never" or (
            META_PROGRESS_TOKEN in meta and (tool.heartbeat or server.heartbeat)):
        return INDIRECT
    arguments = _arguments(params)
    if not tool.takes_context:
        return tool.call(arguments)
    context = Context(request_id, meta, flight, "tools/call")
    return _resumable(server, params, context, name, arguments, lambda: tool.call(arguments, context))


def _arguments(params: dict[str, Any]) -> dict[str, Any]:
    arguments = params.get("arguments")
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise InvalidParams("Invalid params: \"arguments\" must be an object")
    return arguments


def _call_tool(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    name = _named("tools/call", params)
    arguments = _arguments(params)
    tool = server.tools.get(name)
    if tool is None:
        raise InvalidParams(f"Unknown tool: {name}")
    if tool.requires_client_capabilities:
        declared = context.client_capabilities
        missing = {k: v for k, v in tool.requires_client_capabilities.items() if k not in declared}
        if missing:
            raise MissingClientCapability(f"Missing required client capability: {', '.join(missing)}",
                                          data={"requiredCapabilities": missing})
    every = tool.heartbeat if tool.heartbeat is not None else server.heartbeat
    if every and context.progress_token is not None and context.flight.streams:
        from ._heartbeat import Heartbeat  # only servers whose calls beat load it (and the deadline thread)

        with Heartbeat(context.flight, context.progress_token, every):
            return _run_tool(server, params, context, tool, name, arguments)
    return _run_tool(server, params, context, tool, name, arguments)


def _run_tool(server: Server, params: dict[str, Any], context: Context, tool: Tool, name: str,
              arguments: dict[str, Any]) -> dict[str, Any]:
    if tool.task != "never" and _tasks().task_mode(tool.task, context):
        tasks = _tasks().task_manager(server)
        return _resumable(server, params, context, name, arguments,
                          lambda: tasks.call(context, lambda: tool.call(arguments, context if tool.takes_context
                                                                        else None)))
    if context.peer is not None:  # a legacy session: the tool's log records reach the client
        with context.logs_to_client():
            return tool.call(arguments, context if tool.takes_context else None)
    if not tool.takes_context:
        return tool.call(arguments)
    return _resumable(server, params, context, name, arguments, lambda: tool.call(arguments, context))

def _list_resources(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _page(server, params, "resources", [r.definition for r in server.resources.values()])

def _list_templates(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    return _page(server, params, "resourceTemplates", [t.definition for t in server.resource_templates])

def _read_resource(server: Server, params: dict[str, Any], context: Context) -> dict[str, Any]:
    uri = _named("resources/read", params)
    from ._resources import ResourceNotFound  # the resource and completion modules load only when asked for

    def read() -> dict[str, Any]:
        try:
            return cacheable(server, {"contents": server.read_resource(uri, context)})
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
    from ._completions import complete

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
    Notifications go out through the flight. Under a time bound (server.subscriptions.max_seconds) it
    ends then as at shutdown, with the graceful result (spec #3171: the client knows to listen again)."""
    if not server.subscriptions.enabled:
        raise MethodNotFound("Method not found: subscriptions/listen", data={
            "reason": "this server serves no subscriptions/listen streams: its capabilities name no list "
                      "changes or subscriptions to listen for"})
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
    tasks = _tasks().listened_tasks(server, wanted.get("taskIds"), context) if "taskIds" in wanted else []
    if tasks:
        honoured["taskIds"] = tasks
    listener = Listener(context.request_id, {LIST_CHANGED[key][0] for key in honoured if key in LIST_CHANGED},
                        set(served), context.flight, frozenset(tasks))
    server.subscriptions.open(listener)
    context.on_cancel(listener.ended.set)
    if server.subscriptions.max_seconds is not None:
        from . import _deadlines

        listener.on_end(_deadlines.after(server.subscriptions.max_seconds, listener.ended.set))
    listener.send("notifications/subscriptions/acknowledged", {"notifications": honoured})
    return Listening(server, listener, context)

METHODS: dict[str, tuple[Optional[str], Handler]] = {
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
    "tasks/get": (None, _of_tasks("get_task")),
    "tasks/update": (None, _of_tasks("update_task")),
    "tasks/cancel": (None, _of_tasks("cancel_task")),
    "skills/list": (None, _of_skills("list_skills")),
    "skills/get": (None, _of_skills("get_skill")),
    "resources/directory/read": (None, _of_skills("read_directory")),
}

# Methods legacy sessions have no such thing as: extensions are 2026-07-28's (TASKS.md §1; no legacy schema has
# `extensions`, LEGACY.md §3), so there skill files are plain resources.
MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen", "tasks/get", "tasks/update", "tasks/cancel",
                         "skills/list", "skills/get", "resources/directory/read"})
