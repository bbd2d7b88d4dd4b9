"""An MCP client in the test's own process: test a server from pytest without a subprocess or a socket.

    from mcpserver.testing import Client, accept

    def test_delete_asks_first():
        with Client(server, on_elicit=lambda params: accept(confirm=True)) as client:
            result = client.call_tool("delete_file", {"path": "/tmp/x"})
            assert result.text == "Deleted /tmp/x." and result.asked[0]["method"] == "elicitation/create"

Rules of this module:
- Nothing is faked. Every message the client sends is encoded to bytes and read by `protocol.parse`,
  answered by `protocol.dispatch` with a Flight (and, in a legacy session, the LegacyPeer the transports
  hold), and every message the server sends is encoded by `protocol.encode` and decoded again: a test
  sees what a transport would send. A call that runs the author's code runs on a thread of its own, as
  over stdio, while the calling thread is the client: it collects progress and log notifications and
  answers the server's requests. Tool functions are never called directly.
- The client declares the capabilities it can answer: `on_elicit`, `on_sample`, `on_roots` (callbacks
  given the request's params, returning its result) or canned `answers` by method. A tool that needs one
  the test did not give gets the real refusal: -32021, or an isError result in a legacy session.
- The same test code answers input in either era: in 2026-07-28 by calling again with inputResponses and
  the requestState (MRTR), in a legacy session by answering the server's request while the tool waits,
  in a task by tasks/update.
- A call never hangs a test: past its timeout it is cancelled (notifications/cancelled, as a client
  sends it) and TimeoutError is raised. `start_tool` returns a RunningCall the test can cancel.
- A JSON-RPC error is a ClientError (a ProtocolError with the code, message and data, and the HTTP status
  the binding would answer with); a cancelled call raises RequestCancelled; a tool's own failure is a
  result whose `is_error` is true.
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
from typing import NamedTuple  # only tests import this module, so typing's start-up cost is nobody's

from . import protocol
from ._context import Flight
from ._json import THREAD_STACK_BYTES
from ._loader import load_target
from ._server import Server
from ._wire import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROGRESS_TOKEN,
    META_SERVER_INFO,
    META_VERSION,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
)
from .errors import ProtocolError
from .legacy import LEGACY_VERSIONS, LegacyPeer

TYPE_CHECKING = False
if TYPE_CHECKING:  # the package's habit: names for type checkers only
    from typing import Any, Callable, NoReturn, Optional, Union

    Answerer = Callable[[dict[str, Any]], dict[str, Any]]
    OnProgress = Callable[["Progress"], None]

__all__ = ["Client", "ClientError", "Completion", "Discovery", "InputNotAnswered", "LogRecord", "Progress",
           "PromptResult", "RequestCancelled", "ResourceResult", "Result", "RunningCall", "ToolCallResult", "accept",
           "decline", "roots", "sampled"]

MODERN, LEGACY = "modern", "legacy"
DEFAULT_TIMEOUT = 30.0  # seconds a call may take before it is cancelled and the test told
MAX_ROUNDS = 100  # input_required rounds of one call: more is a tool that never stops asking
MAX_PAGES = 10_000  # pages of one list: more is a cursor that never ends
CANCEL_GRACE = 5.0  # seconds a timed-out call is given to stop after its cancel, before the test is told anyway
_METHOD_OF = {"on_elicit": "elicitation/create", "on_sample": "sampling/createMessage", "on_roots": "roots/list"}
_CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
_TERMINAL = ("completed", "failed", "cancelled")


# -- answers a test gives --------------------------------------------------------------------------------


def accept(**content: Any) -> dict[str, Any]:
    """An ElicitResult that accepts the form with `content`."""
    return {"action": "accept", "content": content}


def decline() -> dict[str, Any]:
    """An ElicitResult that declines the form."""
    return {"action": "decline"}


def sampled(text: str, *, model: str = "mcpserver-testing") -> dict[str, Any]:
    """A CreateMessageResult: the client's model answered `text`."""
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": model}


def roots(*uris: str) -> dict[str, Any]:
    """A ListRootsResult naming `uris`."""
    return {"roots": [{"uri": uri} for uri in uris]}


# -- what a test gets back -------------------------------------------------------------------------------


class Progress(NamedTuple):
    """One notifications/progress, as it arrived."""

    progress: float
    total: Optional[float] = None
    message: Optional[str] = None


class LogRecord(NamedTuple):
    """One notifications/message (a legacy session's log record)."""

    level: str
    data: Any
    logger: Optional[str] = None


class ClientError(ProtocolError):
    """The server answered with a JSON-RPC error. `code`, `message` and `data` are the error's,
    `http_status` what the Streamable HTTP binding answers it with, `response` the whole response."""

    def __init__(self, error: dict[str, Any], response: dict[str, Any], http_status: int = 200):
        super().__init__(str(error.get("message", "")), error.get("data"), http_status=http_status)
        self.code = error.get("code", 0)
        self.response = response

    def __str__(self) -> str:
        return f"{self.code} {self.message}" + (f" (data: {self.data!r})" if self.data is not None else "")


class RequestCancelled(Exception):
    """The call was cancelled (by the test, or a task by tasks/cancel): no answer was sent for it."""


class InputNotAnswered(Exception):
    """The server asked for input this client has no answer for (its canned answers ran out, or a
    capability was declared with `capabilities=` and nothing to answer it)."""


class Result:
    """A completed request: `raw`, its result as sent, and what came with it, in order of arrival:
    `progress`, `logs`, every notification for it (`notifications`), and the input the server `asked`."""

    __slots__ = ("asked", "logs", "notifications", "progress", "raw")

    def __init__(self, raw: dict[str, Any], trace: Optional[_Trace] = None):
        trace = trace if trace is not None else _Trace(None)
        self.raw = raw
        self.progress: list[Progress] = list(trace.progress)
        self.logs: list[LogRecord] = list(trace.logs)
        self.notifications: list[dict[str, Any]] = list(trace.notifications)
        self.asked: list[dict[str, Any]] = list(trace.asked)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.raw!r})"


class ToolCallResult(Result):
    """A CallToolResult: `text` (its text blocks, joined by newlines), `structured`, `is_error`, `content`;
    `task_id` when it ran as a task."""

    __slots__ = ("task_id",)

    def __init__(self, raw: dict[str, Any], trace: Optional[_Trace] = None, task_id: Optional[str] = None):
        super().__init__(raw, trace)
        self.task_id = task_id

    @property
    def content(self) -> list[dict[str, Any]]:
        return list(self.raw.get("content", []))

    @property
    def text(self) -> str:
        return "\n".join(block["text"] for block in self.content if block.get("type") == "text")

    @property
    def structured(self) -> Any:
        return self.raw.get("structuredContent")

    @property
    def is_error(self) -> bool:
        return self.raw.get("isError") is True


class ResourceResult(Result):
    """A ReadResourceResult: `contents`; `text` (the text contents, joined) and `blob` (the first binary
    content, decoded)."""

    __slots__ = ()

    @property
    def contents(self) -> list[dict[str, Any]]:
        return list(self.raw.get("contents", []))

    @property
    def text(self) -> str:
        return "\n".join(item["text"] for item in self.contents if "text" in item)

    @property
    def blob(self) -> Optional[bytes]:
        found = next((item["blob"] for item in self.contents if "blob" in item), None)
        return None if found is None else base64.b64decode(found)


class PromptResult(Result):
    """A GetPromptResult: `messages`, `description`; `text`, the text of every message, joined."""

    __slots__ = ()

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.raw.get("messages", []))

    @property
    def description(self) -> Optional[str]:
        return self.raw.get("description")

    @property
    def text(self) -> str:
        blocks = [message.get("content", {}) for message in self.messages]
        return "\n".join(block["text"] for block in blocks if block.get("type") == "text")


class Completion(Result):
    """A CompleteResult: `values`, `total`, `has_more`."""

    __slots__ = ()

    @property
    def values(self) -> list[str]:
        return list(self.raw.get("completion", {}).get("values", []))

    @property
    def total(self) -> Optional[int]:
        total: Optional[int] = self.raw.get("completion", {}).get("total")
        return total

    @property
    def has_more(self) -> bool:
        return self.raw.get("completion", {}).get("hasMore") is True


class Discovery(Result):
    """What the server says of itself: server/discover's result in 2026-07-28, the InitializeResult in a
    legacy session. `supported_versions`, `capabilities`, `instructions`, `server_info`."""

    __slots__ = ()

    @property
    def supported_versions(self) -> list[str]:
        if "supportedVersions" in self.raw:
            return list(self.raw["supportedVersions"])
        return [self.raw["protocolVersion"]]

    @property
    def capabilities(self) -> dict[str, Any]:
        return dict(self.raw.get("capabilities", {}))

    @property
    def instructions(self) -> Optional[str]:
        return self.raw.get("instructions")

    @property
    def server_info(self) -> Optional[dict[str, Any]]:
        info: Optional[dict[str, Any]] = self.raw.get("serverInfo") or self.raw.get("_meta", {}).get(META_SERVER_INFO)
        return info


# -- one call, from the client's side --------------------------------------------------------------------


class _Trace:
    """What a call saw besides its answer, over all its rounds; `changed` wakes who waits for progress."""

    def __init__(self, on_progress: Optional[OnProgress]):
        self.on_progress = on_progress
        self.progress: list[Progress] = []
        self.logs: list[LogRecord] = []
        self.notifications: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []
        self.changed = threading.Condition()

    def notified(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        with self.changed:
            self.notifications.append(message)
            if message.get("method") == "notifications/message":
                self.logs.append(LogRecord(params.get("level", ""), params.get("data"), params.get("logger")))
            if message.get("method") != "notifications/progress":
                return
            record = Progress(params.get("progress", 0), params.get("total"), params.get("message"))
            self.progress.append(record)
            self.changed.notify_all()
        if self.on_progress is not None:  # outside the lock: the callback may cancel, or wait
            self.on_progress(record)


class RunningCall:
    """A request under way, from Client.start_tool (called Call up to 0.2.0: mcpserver.Call is what a middleware
    sees of a request, another thing): `cancel()` it, `wait()` for it, read its `progress` so
    far, get its `result()`. `request_id` is the JSON-RPC id of its latest round; `task_id` is set once
    the call runs as a task."""

    def __init__(self, method: str, params: dict[str, Any], *, timeout: float, task: bool = False,
                 progress: Union[bool, OnProgress] = False, token: Optional[str] = None):
        self.method = method
        self.params = params
        self.task = task
        self.token = token if progress else None
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.trace = _Trace(progress if callable(progress) else None)
        self.request_id: Any = None
        self.task_id: Optional[str] = None
        self.cancel_requested = False
        self._client: Optional[Client] = None
        self._finished = threading.Event()
        self._outcome: tuple[bool, Any] = (False, None)

    @property
    def progress(self) -> list[Progress]:
        with self.trace.changed:
            return list(self.trace.progress)

    @property
    def logs(self) -> list[LogRecord]:
        with self.trace.changed:
            return list(self.trace.logs)

    def cancel(self, reason: Optional[str] = None) -> None:
        """Stop the call: notifications/cancelled for the request in flight, or tasks/cancel for a task
        (sent by the call's own loop). Its result() then raises RequestCancelled, once the server is done."""
        if self._client is not None:
            self._client._cancel(self, reason)

    def done(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the call has ended (answered, failed or cancelled, and the server done with it)."""
        return self._finished.wait(timeout)

    def wait_for_progress(self, count: int = 1, timeout: Optional[float] = None) -> list[Progress]:
        """The progress so far, once `count` notifications have come or the call has ended; TimeoutError
        if neither happens within `timeout` (default: the call's own)."""
        limit = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self.trace.changed:
            while len(self.trace.progress) < count and not self._finished.is_set():
                left = limit - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.trace.progress)} progress notification(s), not {count}, "
                                       f"in {timeout if timeout is not None else self.timeout:g} s")
                self.trace.changed.wait(min(left, 0.05))  # the end of the call does not notify: look again
            return list(self.trace.progress)

    def result(self, timeout: Optional[float] = None) -> ToolCallResult:
        """The tool's result; raises what the call ended in (ClientError, RequestCancelled, TimeoutError)."""
        if not self._finished.wait(timeout):
            raise TimeoutError(f"{self.method} has not ended within {timeout:g} s")
        failed, value = self._outcome
        if failed:
            raise value
        return value  # type: ignore[no-any-return]

    def _end(self, failed: bool, value: Any) -> None:
        self._outcome = (failed, value)
        self._finished.set()
        with self.trace.changed:
            self.trace.changed.notify_all()


# -- the client ------------------------------------------------------------------------------------------


class Client:
    """A client of `server` (a Server, or a TARGET as the command line takes) in this process.

    `era`: "modern" (2026-07-28: every request carries its _meta) or "legacy" (an initialize handshake at
    `revision`, default 2025-11-25, then the session's requests). `on_elicit`, `on_sample`, `on_roots` and
    `answers` (method -> a result, or a list of results given in turn) answer the server's input requests
    and declare the capabilities they stand for; `capabilities` adds others. `principal` is who the
    transport would have authenticated (an mcpserver.auth.Principal), `timeout` the seconds a call may take.
    """

    def __init__(self, server: Union[Server, str], *, era: str = MODERN, revision: Optional[str] = None,
                 on_elicit: Optional[Answerer] = None, on_sample: Optional[Answerer] = None,
                 on_roots: Optional[Answerer] = None, answers: Optional[dict[str, Any]] = None,
                 capabilities: Optional[dict[str, Any]] = None, client_info: Optional[dict[str, Any]] = None,
                 principal: Any = None, timeout: float = DEFAULT_TIMEOUT, poll_interval: float = 0.01):
        if era not in (MODERN, LEGACY):
            raise ValueError(f'era must be "modern" or "legacy", not {era!r}')
        self._owns_server = isinstance(server, str)  # loaded here: shut down here
        self.server: Server = load_target(server) if isinstance(server, str) else server
        self.server.middleware.trace_if_configured()
        self.era = era
        self.protocol_version = revision or (PROTOCOL_VERSION if era == MODERN else LEGACY_VERSIONS[0])
        self.client_info = client_info or {"name": "mcpserver-testing", "version": "1"}
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.notifications: list[dict[str, Any]] = []  # a legacy session's own: list changes, resource updates
        self.initialize_result: Optional[dict[str, Any]] = None
        handlers = {"on_elicit": on_elicit, "on_sample": on_sample, "on_roots": on_roots}
        self._handlers = {_METHOD_OF[name]: fn for name, fn in handlers.items() if fn is not None}
        # Lists are copied: they are used up, answer by answer, and the test's own stays as written.
        self._answers = {method: list(a) if isinstance(a, list) else a for method, a in (answers or {}).items()}
        given = [*self._handlers, *self._answers]
        self._capabilities: dict[str, Any] = {_CAPABILITY_OF[m]: {} for m in given if m in _CAPABILITY_OF}
        self._capabilities.update(capabilities or {})
        self._principal = principal
        self._lock = threading.Lock()
        self._ids = 0
        self._flights: dict[Any, Flight] = {}
        self._peer: Optional[LegacyPeer] = None
        self._closed = False
        threading.stack_size(THREAD_STACK_BYTES)  # as both transports do: musl's default is too small for tools
        if era == LEGACY:
            self._initialize()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Cancel what is still running and end the legacy session; a server loaded from a TARGET is shut
        down (one passed in is the test's, and is left as it is)."""
        with self._lock:
            flights, self._flights, self._closed = list(self._flights.values()), {}, True
        for flight in flights:
            flight.cancel()
        if self._peer is not None:
            self._peer.close()
        if self._owns_server:
            self.server.shutdown()

    @property
    def session(self) -> Any:
        """The legacy session the handshake opened (mcpserver.legacy.LegacySession); None in 2026-07-28."""
        return None if self._peer is None else self._peer.session

    # -- the methods ---------------------------------------------------------------------------------------

    def discover(self) -> Discovery:
        """server/discover in 2026-07-28; in a legacy session, what initialize answered."""
        if self.initialize_result is not None:
            return Discovery(self.initialize_result)
        return Discovery(self.request("server/discover"))

    def list_tools(self) -> list[dict[str, Any]]:
        return self._list("tools/list", "tools")

    def call_tool(self, name: str, arguments: Optional[dict[str, Any]] = None, *,
                  progress: Union[bool, OnProgress] = False, task: bool = False, timeout: Optional[float] = None,
                  cancel_after: Optional[float] = None) -> ToolCallResult:
        """Call a tool and wait for its result, answering its input. `progress`: True to ask for progress
        (collected in the result's `progress`), or a callable called with each Progress as it comes. `task`:
        declare the Tasks extension, and poll a task to its end. `cancel_after`: cancel the call if it has
        not ended after that many seconds (it then raises RequestCancelled)."""
        call = self._call("tools/call", {"name": name, "arguments": arguments or {}}, progress, task, timeout)
        if cancel_after is None:
            return self._tool_result(call)
        self._start(call)
        if not call.wait(cancel_after):
            call.cancel("cancel_after")
        return call.result()

    def start_tool(self, name: str, arguments: Optional[dict[str, Any]] = None, *,
                   progress: Union[bool, OnProgress] = False, task: bool = False,
                   timeout: Optional[float] = None) -> RunningCall:
        """Start a tool call and return at once: a RunningCall to cancel, wait for, or get the result of. Input it
        asks is answered on the call's own thread, so the callbacks must be safe to run there."""
        call = self._call("tools/call", {"name": name, "arguments": arguments or {}}, progress, task, timeout)
        self._start(call)
        return call

    def list_resources(self) -> list[dict[str, Any]]:
        return self._list("resources/list", "resources")

    def list_resource_templates(self) -> list[dict[str, Any]]:
        return self._list("resources/templates/list", "resourceTemplates")

    def read_resource(self, uri: str, *, progress: Union[bool, OnProgress] = False,
                      timeout: Optional[float] = None) -> ResourceResult:
        call = self._call("resources/read", {"uri": uri}, progress, False, timeout)
        return ResourceResult(self._run(call), call.trace)

    def list_skills(self) -> list[dict[str, Any]]:
        """Every page of skills/list (the Skills extension): the skill entries."""
        return self._list("skills/list", "skills")

    def get_skill(self, uri: str) -> dict[str, Any]:
        """skills/get: the entry of the skill whose SKILL.md is `uri`."""
        return self.request("skills/get", {"uri": uri})["skill"]  # type: ignore[no-any-return]

    def list_prompts(self) -> list[dict[str, Any]]:
        return self._list("prompts/list", "prompts")

    def get_prompt(self, name: str, arguments: Optional[dict[str, Any]] = None, *,
                   progress: Union[bool, OnProgress] = False, timeout: Optional[float] = None) -> PromptResult:
        params: dict[str, Any] = {"name": name} if arguments is None else {"name": name, "arguments": arguments}
        call = self._call("prompts/get", params, progress, False, timeout)
        return PromptResult(self._run(call), call.trace)

    def complete(self, argument: str, value: str, *, prompt: Optional[str] = None, resource: Optional[str] = None,
                 context: Optional[dict[str, str]] = None) -> Completion:
        """completion/complete of `argument` typed so far as `value`, for a `prompt` (its name) or a
        `resource` template (its URI template); `context`: the arguments the user already chose."""
        if (prompt is None) == (resource is None):
            raise ValueError("complete() needs prompt= or resource=, one of them")
        ref = {"type": "ref/prompt", "name": prompt} if prompt is not None else {"type": "ref/resource",
                                                                                 "uri": resource}
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context is not None:
            params["context"] = {"arguments": context}
        return Completion(self.request("completion/complete", params))

    def set_log_level(self, level: str) -> None:
        """logging/setLevel: the least severe record the legacy session is sent."""
        self.request("logging/setLevel", {"level": level})

    def request(self, method: str, params: Optional[dict[str, Any]] = None, *,
                timeout: Optional[float] = None) -> dict[str, Any]:
        """Any request, with input answered as for a tool: its result as sent. In 2026-07-28 the _meta is
        added (a `_meta` in `params` is merged over it)."""
        return self._run(self._call(method, dict(params or {}), False, False, timeout))

    # -- rounds ----------------------------------------------------------------------------------------------

    def _call(self, method: str, params: dict[str, Any], progress: Union[bool, OnProgress], task: bool,
              timeout: Optional[float]) -> RunningCall:
        if self._closed:
            raise RuntimeError("this Client is closed")
        if task and self.era == LEGACY:
            raise ValueError("the Tasks extension does not apply to a legacy session")
        call = RunningCall(method, params, timeout=self.timeout if timeout is None else timeout, task=task,
                    progress=progress, token=f"progress-{self._next_id()}")
        call._client = self
        return call

    def _start(self, call: RunningCall) -> None:
        def drive() -> None:
            try:
                self._tool_result(call)
            except BaseException:  # kept by the call: result() raises it in the test's thread
                pass

        threading.Thread(target=drive, name="mcpserver-testing-client", daemon=True).start()

    def _tool_result(self, call: RunningCall) -> ToolCallResult:
        try:
            raw = self._run(call)
        except BaseException as exc:
            call._end(True, exc)
            raise
        result = ToolCallResult(raw, call.trace, call.task_id)
        call._end(False, result)
        return result

    def _run(self, call: RunningCall) -> dict[str, Any]:
        """Every round of a call: its final result, with input answered (MRTR) and a task polled to its end."""
        params = call.params
        for _ in range(MAX_ROUNDS):
            result = self._round(call, call.method, params)
            kind = result.get("resultType")
            if kind == "input_required":
                asked = result.get("inputRequests") or {}
                responses = {key: self._answer(request, call) for key, request in asked.items()}
                params = {**call.params, "inputResponses": responses}
                if "requestState" in result:
                    params["requestState"] = result["requestState"]
                continue
            if kind == "task" and call.task:
                return self._follow_task(call, result["taskId"])
            return result
        raise InputNotAnswered(f"{call.method} still asked for input after {MAX_ROUNDS} rounds")

    def _round(self, call: RunningCall, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request and its response, through the wire's encoding both ways; the result, or ClientError."""
        if call.cancel_requested and method == call.method:
            raise RequestCancelled(f"{call.method} was cancelled")
        message = {"jsonrpc": "2.0", "id": self._next_id(), "method": method,
                   "params": self._with_meta(params, call, token=method == call.method)}
        typed = protocol.parse(_encode(message))
        if isinstance(typed, protocol.Refusal):  # what the test sent cannot be read (too deep, say)
            reply = typed.reply
        else:
            assert isinstance(typed, protocol.Request)
            if typed.work == protocol.AUTHOR:
                return self._in_flight(typed, call)
            flight = Flight(principal=self._principal, transport="in-process")
            reply = protocol.dispatch(typed, self.server, flight=flight, peer=self._peer)  # at once, as a reader does
        return _result_of(protocol.encode(reply.response or {}), reply.http_status)

    def _with_meta(self, params: dict[str, Any], call: RunningCall, *, token: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if self.era == MODERN:
            capabilities = json.loads(json.dumps(self._capabilities))
            if call.task:
                capabilities.setdefault("extensions", {})[TASKS_EXTENSION] = {}
            meta = {META_VERSION: self.protocol_version, META_CAPABILITIES: capabilities,
                    META_CLIENT_INFO: self.client_info}
        if token and call.token is not None:
            meta[META_PROGRESS_TOKEN] = call.token
        meta.update(params.get("_meta") or {})
        return {**params, "_meta": meta} if meta else params

    # -- a request in flight ---------------------------------------------------------------------------------

    def _in_flight(self, request: protocol.Request, call: RunningCall) -> dict[str, Any]:
        """Run `request` on a thread of its own with a Flight, as a transport does, while this thread takes
        what the server sends for it; the result once it is done."""
        messages: queue.Queue[tuple[str, Any]] = queue.Queue()
        flight = Flight(lambda message: messages.put(("message", protocol.encode(message))), self._principal,
                        "in-process")
        with self._lock:
            self._flights[request.id] = flight
            call.request_id = request.id
            cancelled = call.cancel_requested
        if cancelled:  # cancelled while the previous round was answered: this one is never sent
            self._forget(request.id)
            raise RequestCancelled(f"{call.method} was cancelled")
        threading.Thread(target=self._serve, args=(request, flight, messages), name="mcpserver-testing-call",
                         daemon=True).start()
        try:
            return self._receive(messages, call)
        except BaseException:  # the client gave up (a callback failed, a timeout): so must the server
            self._send_cancel(request.id, "the test's client gave up")
            raise
        finally:
            self._forget(request.id)

    def _serve(self, request: protocol.Request, flight: Flight, messages: queue.Queue[tuple[str, Any]]) -> None:
        """The server's side of one request, as stdio runs it: dispatch, then answer unless cancelled."""
        try:
            reply = protocol.dispatch(request, self.server, flight=flight, peer=self._peer)
            response = reply.response
            if response is None:
                flight.finish()
            else:
                flight.finish(lambda: messages.put(("response", (protocol.encode(response), reply.http_status))))
        except BaseException as exc:  # dispatch answers every Exception: this is a fault in the core itself
            messages.put(("crash", exc))
        finally:
            messages.put(("end", None))

    def _receive(self, messages: queue.Queue[tuple[str, Any]], call: RunningCall) -> dict[str, Any]:
        answer: Optional[tuple[bytes, int]] = None
        while True:
            try:
                kind, value = messages.get(timeout=max(0.0, call.deadline - time.monotonic()))
            except queue.Empty:
                self._time_out(messages, call)
            if kind == "message":
                self._from_server(json.loads(value), call)
            elif kind == "response":
                answer = value
            elif kind == "crash":
                raise value
            else:
                break
        if answer is None:  # the server sent nothing for it: cancelled, as the transports do
            raise RequestCancelled(f"{call.method} (id {call.request_id!r}) was cancelled: nothing was sent for it")
        return _result_of(*answer)

    def _time_out(self, messages: queue.Queue[tuple[str, Any]], call: RunningCall) -> NoReturn:
        """The call took too long: cancel it, give it CANCEL_GRACE to stop, and raise TimeoutError."""
        self._send_cancel(call.request_id, "timed out")
        limit = time.monotonic() + CANCEL_GRACE
        while time.monotonic() < limit:
            try:
                if messages.get(timeout=max(0.0, limit - time.monotonic()))[0] == "end":
                    break
            except queue.Empty:
                break
        raise TimeoutError(f"{call.method} did not end within {call.timeout:g} s, and was cancelled")

    def _from_server(self, message: dict[str, Any], call: RunningCall) -> None:
        """A notification for the call, or (in a legacy session) the server's request, answered now."""
        if "id" not in message:
            call.trace.notified(message)
            return
        asked = {"method": message.get("method"), "params": message.get("params") or {}}
        response = {"jsonrpc": "2.0", "id": message["id"], "result": self._answer(asked, call)}
        typed = protocol.parse(_encode(response))
        if isinstance(typed, protocol.ClientResponse) and self._peer is not None:
            self._peer.answer(typed)

    def _answer(self, asked: dict[str, Any], call: RunningCall) -> Any:
        """The test's answer to one input request: its callback's, else its canned one."""
        with call.trace.changed:
            call.trace.asked.append(asked)
        method, params = asked.get("method", ""), asked.get("params") or {}
        handler = self._handlers.get(method)
        if handler is not None:
            return handler(params)
        with self._lock:
            canned = self._answers.get(method)
            if isinstance(canned, list):
                if not canned:
                    raise InputNotAnswered(f"the server asked for {method} again: every canned answer is used")
                return canned.pop(0)
        if canned is None:
            raise InputNotAnswered(f"the server asked for {method}, which this client has no answer for "
                                   f"(give {_answerer_of(method)}= or answers={{{method!r}: ...}})")
        return canned

    # -- tasks -----------------------------------------------------------------------------------------------

    def _follow_task(self, call: RunningCall, task_id: str) -> dict[str, Any]:
        """Poll the task to its end, answering its input once per key, and cancel it if the test asks."""
        call.task_id = task_id
        answered: set[str] = set()
        cancel_sent = False
        while True:
            if call.cancel_requested and not cancel_sent:
                self._round(call, "tasks/cancel", {"taskId": task_id})
                cancel_sent = True
            task = self._round(call, "tasks/get", {"taskId": task_id})
            status = task.get("status")
            if status == "completed":
                return dict(task["result"])
            if status == "failed":
                raise ClientError(task.get("error") or {}, task)
            if status == "cancelled":
                raise RequestCancelled(f"task {task_id} was cancelled")
            fresh = {key: asked for key, asked in (task.get("inputRequests") or {}).items() if key not in answered}
            if status == "input_required" and fresh:
                responses = {key: self._answer(asked, call) for key, asked in fresh.items()}
                answered.update(responses)
                self._round(call, "tasks/update", {"taskId": task_id, "inputResponses": responses})
                continue
            if time.monotonic() > call.deadline:
                self._round(call, "tasks/cancel", {"taskId": task_id})
                raise TimeoutError(f"task {task_id} did not end within {call.timeout:g} s, and was cancelled")
            time.sleep(self.poll_interval)

    # -- the session and the plumbing ------------------------------------------------------------------------

    def _initialize(self) -> None:
        """The legacy handshake: initialize (the session is the transport's to keep), then initialized."""
        params = {"protocolVersion": self.protocol_version, "capabilities": self._capabilities,
                  "clientInfo": self.client_info}
        typed = protocol.parse(_encode({"jsonrpc": "2.0", "id": self._next_id(), "method": "initialize",
                                        "params": params}))
        assert isinstance(typed, protocol.Request)
        reply = protocol.dispatch(typed, self.server)
        self.initialize_result = _result_of(protocol.encode(reply.response or {}), reply.http_status)
        assert reply.session is not None
        self.protocol_version = reply.session.revision
        self._peer = LegacyPeer(self.server, reply.session,
                                lambda message: self.notifications.append(json.loads(protocol.encode(message))))
        self._peer.transport = "in-process"
        initialized = protocol.parse(_encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        if isinstance(initialized, protocol.Notification):
            self._peer.initialized = True

    def _list(self, method: str, key: str) -> list[dict[str, Any]]:
        """Every page of a list."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(MAX_PAGES):
            result = self.request(method, params)
            items.extend(result.get(key, []))
            if not result.get("nextCursor"):
                return items
            params = {"cursor": result["nextCursor"]}
        raise RuntimeError(f"{method} gave more than {MAX_PAGES} pages")

    def _cancel(self, call: RunningCall, reason: Optional[str]) -> None:
        with self._lock:
            call.cancel_requested = True  # a task's loop sends tasks/cancel; the next round is never sent
            request_id = call.request_id if call.request_id in self._flights else None
        if request_id is not None:
            self._send_cancel(request_id, reason)

    def _send_cancel(self, request_id: Any, reason: Optional[str]) -> None:
        """notifications/cancelled, read as a transport reads it: the flight it names is cancelled."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        typed = protocol.parse(_encode({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}))
        if isinstance(typed, protocol.Cancel):
            with self._lock:
                flight = self._flights.get(typed.request_id)
            if flight is not None:
                flight.cancel()

    def _forget(self, request_id: Any) -> None:
        with self._lock:
            self._flights.pop(request_id, None)

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids


def _encode(message: dict[str, Any]) -> bytes:
    """A message as a client puts it on the wire (the standard library's JSON, not the server's)."""
    return json.dumps(message).encode("utf-8")


def _result_of(data: bytes, http_status: int) -> dict[str, Any]:
    """The result of a response as sent, decoded as a client decodes it; ClientError for an error."""
    response = json.loads(data)
    if "error" in response:
        raise ClientError(response["error"], response, http_status)
    return response["result"]  # type: ignore[no-any-return]


def _answerer_of(method: str) -> str:
    return next((name for name, of in _METHOD_OF.items() if of == method), "on_elicit")


def __getattr__(name: str) -> Any:  # PEP 562: the name RunningCall had, kept for code written before the rename
    if name == "Call":
        import warnings

        warnings.warn("mcpserver.testing.Call is now RunningCall (mcpserver.Call is the middleware's view of a "
                      "request)", DeprecationWarning, stacklevel=2)
        return RunningCall
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
